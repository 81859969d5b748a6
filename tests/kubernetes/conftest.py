"""The Kubernetes provider's tests run against the fake cluster of ``tests/fakes/kubernetes``."""

from tests.fakes.kubernetes.fixture import fake_kubernetes

__all__ = ["fake_kubernetes"]
