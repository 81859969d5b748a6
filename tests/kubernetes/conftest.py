"""The Kubernetes provider's tests run against the fake cluster of ``tests/fakes/kubernetes``.

``use_kubeconfig`` points skyhop's config (the session's ``~/.skyhop/config.yaml``, which the
session worker reads too) at a fake's kubeconfig for the length of a ``with``, and takes any
earlier ``skyhop check`` verdict on kubernetes out of the cache, so the provider is a candidate.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from skyhop.providers.home import skyhop_home
from skyhop.providers.registry import read_checks, write_checks
from tests.fakes.kubernetes.fixture import fake_kubernetes

__all__ = ["fake_kubernetes", "use_kubeconfig"]


@contextlib.contextmanager
def use_kubeconfig(kubeconfig: Path, **settings: Any) -> Iterator[None]:
    config = skyhop_home() / "config.yaml"
    saved = config.read_text() if config.exists() else None
    verdicts = read_checks()
    data = yaml.safe_load(saved or "{}") or {}
    data["kubernetes"] = {"kubeconfig": str(kubeconfig), **settings}
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(yaml.safe_dump(data))
    if "kubernetes" in verdicts:
        write_checks({name: v for name, v in verdicts.items() if name != "kubernetes"})
    try:
        yield
    finally:
        if saved is None:
            config.unlink(missing_ok=True)
        else:
            config.write_text(saved)
        if "kubernetes" in verdicts:
            write_checks(verdicts)
