"""Fidelity tests of the fake Kubernetes: the real ``kubernetes`` client and ``kubectl`` against it."""

from tests.fakes.kubernetes.fixture import fake_kubernetes

__all__ = ["fake_kubernetes"]
