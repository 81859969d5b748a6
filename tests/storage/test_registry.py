"""Every store kind names a class that exists: a typo in the registry only shows at a user's launch."""

from __future__ import annotations

import importlib

import pytest

from skyhop.spec.storage import StoreKind
from skyhop.storage.registry import STORE_TARGETS


@pytest.mark.parametrize("kind", list(StoreKind))
def test_each_store_kind_names_an_importable_store_class(kind: StoreKind) -> None:
    module_name, _, class_name = STORE_TARGETS[kind].partition(":")
    store_class = getattr(importlib.import_module(module_name), class_name)
    for method in ("exists", "create", "labels", "delete", "upload", "list", "rclone_config"):
        assert callable(getattr(store_class, method)), f"{store_class.__name__} lacks {method}"
