"""What skyhop needs of an object store, written once for S3, R2, GCS and Azure Blob.

The worker calls a ``BucketStore`` (through activities, on the worker's credentials); the nodes
never get a store object, only ``rclone_config()``: rclone options that the node's process receives
in its environment as ``RCLONE_CONFIG_<REMOTE>_<OPTION>``, so credentials reach the node without
ever being written into Temporal history or onto the node's disk.

Ownership is recorded on the bucket itself, as labels (S3 tags, GCS labels, Azure container
metadata; keys and values use only lowercase letters, digits and ``_`` so every store takes them):
``skyhop_created=true`` on a bucket skyhop created, ``skyhop_persistent``, and the cluster that
created it. ``down`` deletes a bucket only when its labels say skyhop created it and it is not
persistent; a bucket the user deleted meanwhile is simply gone (``labels`` returns None) and is
never re-created by cleanup.

Every method is idempotent, as activities are retried: ``create`` of a bucket that exists with
skyhop's labels does nothing, ``delete`` of a missing bucket returns False, ``upload`` overwrites.
Methods are synchronous (the SDKs are); activities run them in a thread.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel

from skyhop.spec.storage import StoreKind

__all__ = [
    "CLUSTER_LABEL",
    "CREATED_LABEL",
    "PERSISTENT_LABEL",
    "BucketRecord",
    "BucketStore",
    "ownership_labels",
]

CREATED_LABEL = "skyhop_created"
"""``true`` on every bucket skyhop created (never set on a bucket it only used)."""
PERSISTENT_LABEL = "skyhop_persistent"
"""``true`` or ``false``: whether ``down`` keeps the bucket."""
CLUSTER_LABEL = "skyhop_cluster"
"""The cluster whose launch created the bucket."""


def ownership_labels(cluster: str, persistent: bool) -> dict[str, str]:
    """The labels ``create`` records on a bucket a launch of ``cluster`` makes."""
    return {CREATED_LABEL: "true", PERSISTENT_LABEL: str(persistent).lower(), CLUSTER_LABEL: cluster}


class BucketRecord(BaseModel):
    """One bucket, as ``skyhop storage ls`` shows it."""

    name: str
    store: StoreKind
    region: str | None = None
    created_at: datetime | None = None
    labels: dict[str, str] = {}

    @property
    def created_by_skyhop(self) -> bool:
        return self.labels.get(CREATED_LABEL) == "true"

    @property
    def persistent(self) -> bool:
        return self.labels.get(PERSISTENT_LABEL, "true") != "false"

    @property
    def cluster(self) -> str | None:
        return self.labels.get(CLUSTER_LABEL)


class BucketStore(Protocol):
    """One object store's buckets. Errors are ``skyhop.storage.errors`` types, never the SDK's."""

    kind: StoreKind

    def exists(self, bucket: str) -> bool:
        """Whether the bucket exists and this account can use it."""
        ...

    def create(self, bucket: str, region: str | None, labels: Mapping[str, str]) -> None:
        """Create the bucket with ``labels``; nothing if it exists already and is this account's
        (its labels are left as they are). ``BucketNameTakenError`` if someone else owns the name."""
        ...

    def labels(self, bucket: str) -> dict[str, str] | None:
        """The bucket's labels ({} if it has none), or None if the bucket does not exist."""
        ...

    def delete(self, bucket: str) -> bool:
        """Empty and delete the bucket; False if it did not exist."""
        ...

    def upload(self, source: Path, bucket: str, prefix: str) -> None:
        """Upload a local folder's contents under ``prefix`` (or a file as ``prefix/<its name>``),
        overwriting what is there."""
        ...

    def list(self, label_filter: Mapping[str, str]) -> list[BucketRecord]:
        """The buckets whose labels include every ``label_filter`` item ({}: all of them)."""
        ...

    def rclone_config(self) -> dict[str, str]:
        """rclone's options for a remote on this store (``type``, ``provider``, ``endpoint``,
        credentials ...), lowercase keys as in rclone's docs; the remote's path is
        ``<remote>:<bucket>/<prefix>``."""
        ...
