"""Which store serves each ``StoreKind``, imported on first use (their SDKs are extras)."""

from __future__ import annotations

import importlib

from skyhop.spec.storage import StoreKind
from skyhop.storage.errors import StoreUnavailableError
from skyhop.storage.stores import BucketStore

__all__ = ["STORE_TARGETS", "get_store"]

STORE_TARGETS: dict[StoreKind, str] = {
    StoreKind.S3: "skyhop.storage.s3:S3Store",
    StoreKind.R2: "skyhop.storage.s3:R2Store",
    StoreKind.MINIO: "skyhop.storage.s3:MinioStore",
    StoreKind.GCS: "skyhop.storage.gcs:GcsStore",
    StoreKind.AZURE: "skyhop.storage.azure_blob:AzureBlobStore",
}
"""``module:Class`` of each store; the class takes no arguments (it reads its own configuration:
the SDK's usual credential chain, and ``~/.skyhop/config.yaml`` for endpoints)."""


def get_store(kind: StoreKind) -> BucketStore:
    """The store of ``kind``; ``StoreUnavailableError`` if its SDK or module is missing."""
    module_name, _, class_name = STORE_TARGETS[kind].partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise StoreUnavailableError("", f"{kind.value} storage is not available here: {exc}") from None
    store: BucketStore = getattr(module, class_name)()
    return store
