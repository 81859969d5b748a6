"""Errors of bucket stores, so the worker and the CLI never see an SDK's own exceptions::

    StorageError
    ├── BucketNotFoundError       the bucket does not exist (or was deleted by its owner)
    ├── BucketNameTakenError      the name is taken by a bucket this account cannot use
    ├── StoreAccessError          missing or refused credentials: retrying cannot fix it
    │   └── SealedSecretError     a deployment secret does not open with this payload keyring
    ├── StoreUnavailableError     the store's SDK or configuration is missing (``skyhop[aws]``,
    │                             ``r2.endpoint`` in ``~/.skyhop/config.yaml``)
    └── ContentNotFoundError      a packed tree's manifest or blob is not in the content store

Each message says what to do. ``RETRY_CANNOT_FIX`` lists the classes an activity retry policy
should not retry (a missing bucket, a taken name, credentials, a missing SDK).
"""

from __future__ import annotations

__all__ = [
    "RETRY_CANNOT_FIX",
    "SealedSecretError",
    "BucketNameTakenError",
    "BucketNotFoundError",
    "ContentNotFoundError",
    "StorageError",
    "StoreAccessError",
    "StoreUnavailableError",
]


class StorageError(Exception):
    """A bucket operation failed; ``bucket`` names it ("" when the failure is the store's)."""

    def __init__(self, bucket: str, message: str) -> None:
        self.bucket = bucket
        super().__init__(message)


class BucketNotFoundError(StorageError):
    pass


class BucketNameTakenError(StorageError):
    pass


class StoreAccessError(StorageError):
    pass


class SealedSecretError(StoreAccessError):
    """The store holds a secret sealed with another payload key: this machine is in another deployment."""


class StoreUnavailableError(StorageError):
    pass


class ContentNotFoundError(StorageError):
    """The client packed into another store than the worker reads, or the object was deleted."""


RETRY_CANNOT_FIX = [
    cls.__name__
    for cls in (
        BucketNotFoundError,
        BucketNameTakenError,
        StoreAccessError,
        SealedSecretError,
        StoreUnavailableError,
        ContentNotFoundError,
    )
]
