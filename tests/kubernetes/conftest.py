"""The Kubernetes provider's tests run against the fake cluster of ``tests/fakes/kubernetes``.

``use_kubeconfig`` points skyhop's config (the session's ``~/.skyhop/config.yaml``, which the
session worker reads too) at a fake's kubeconfig for the length of a ``with``, and takes any
earlier ``skyhop check`` verdict on kubernetes out of the cache, so the provider is a candidate.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from skyhop.providers.home import skyhop_home
from skyhop.providers.registry import check_cache_path
from tests.fakes.kubernetes.fixture import fake_kubernetes

__all__ = ["fake_kubernetes", "use_kubeconfig"]


@contextlib.contextmanager
def use_kubeconfig(kubeconfig: Path, **settings: Any) -> Iterator[None]:
    config = skyhop_home() / "config.yaml"
    checks = check_cache_path()
    saved = {path: path.read_text() if path.exists() else None for path in (config, checks)}
    data = yaml.safe_load(saved[config] or "{}") or {}
    data["kubernetes"] = {"kubeconfig": str(kubeconfig), **settings}
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(yaml.safe_dump(data))
    if saved[checks] is not None:
        verdicts = json.loads(saved[checks] or "{}")
        verdicts.pop("kubernetes", None)
        checks.write_text(json.dumps(verdicts))
    try:
        yield
    finally:
        for path, text in saved.items():
            if text is None:
                path.unlink(missing_ok=True)
            else:
                path.write_text(text)
