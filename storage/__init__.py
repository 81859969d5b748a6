"""Buckets: the object stores that ``file_mounts`` storage entries live in (S3, R2, GCS, Azure Blob)."""

from skyhop.storage.errors import (
    RETRY_CANNOT_FIX,
    BucketNameTakenError,
    BucketNotFoundError,
    StorageError,
    StoreAccessError,
    StoreUnavailableError,
)
from skyhop.storage.registry import STORE_TARGETS, get_store
from skyhop.storage.stores import (
    CLUSTER_LABEL,
    CREATED_LABEL,
    PERSISTENT_LABEL,
    BucketRecord,
    BucketStore,
    ownership_labels,
)

__all__ = [
    "CLUSTER_LABEL",
    "CREATED_LABEL",
    "PERSISTENT_LABEL",
    "RETRY_CANNOT_FIX",
    "STORE_TARGETS",
    "BucketNameTakenError",
    "BucketNotFoundError",
    "BucketRecord",
    "BucketStore",
    "StorageError",
    "StoreAccessError",
    "StoreUnavailableError",
    "get_store",
    "ownership_labels",
]
