"""Bucket storage in ``file_mounts``, with SkyPilot's forms, defaults and validation rules.

A ``file_mounts`` value is one of:

- a local path (copied to every node, as before);
- a URL: ``s3://bucket/path``, ``gs://…``, ``r2://…`` (the objects under it are copied to the node)
  or ``https://host/file`` (the file is downloaded); these are ``COPY`` only;
- a storage dict ``{name, source, store, mode, persistent}`` (``Storage``): a bucket that is created
  when missing (``name``), filled from a local ``source``, and copied or mounted on every node.

The rules are SkyPilot's (``sky/data/storage.py``, ``Storage._validate_storage_spec``): a local
source needs a ``name``; a bucket URL source names the bucket itself, so ``name`` must not be given;
without a source, ``name`` is required and the mode cannot be ``COPY``; an empty ``name`` is no name
(SkyPilot tests ``if not name``); a URL with a path below the bucket is that folder of the bucket,
copied or mounted (SkyPilot's bucket sub-path); ``mode`` defaults to ``MOUNT`` and ``persistent`` to
true. A bucket on a store of a cloud skyhop has no provider for (``nebius``, ``oci``, ``ibm``) is
refused as that cloud is (``spec.refused.MissingCloudError``, raised by the loader).
"""

from __future__ import annotations

import re
from enum import StrEnum
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

__all__ = [
    "NO_HUGGING_FACE",
    "OTHER_SKYPILOT_STORES",
    "BucketRef",
    "Storage",
    "StorageMode",
    "StoreKind",
    "URL_SCHEMES",
    "bucket_url_of",
]

OTHER_SKYPILOT_STORES = frozenset({"ibm", "oci", "nebius", "coreweave", "vastdata", "hf", "volume"})
"""SkyPilot's other ``store:`` values (its ``StoreType``), refused by name rather than as unknown."""
NO_HUGGING_FACE = (
    "Hugging Face sources (store: hf, hf://) are not supported yet; download in setup "
    "(huggingface-cli download REPO --local-dir DIR), or copy the files to a bucket first"
)


class StorageMode(StrEnum):
    """How a bucket reaches a node (SkyPilot's ``StorageMode``)."""

    MOUNT = "MOUNT"
    """A FUSE mount: reads fetch from the bucket, a written file is uploaded when it is closed."""
    COPY = "COPY"
    """Downloaded to the node at launch; later writes stay on the node."""
    MOUNT_CACHED = "MOUNT_CACHED"
    """A FUSE mount with a local write-back cache: writes return at disk speed and are uploaded in
    order in the background, all flushed before the job is reported done."""

    @property
    def mounts(self) -> bool:
        return self is not StorageMode.COPY


class StoreKind(StrEnum):
    """An object store (SkyPilot's ``store:`` values)."""

    S3 = "s3"
    GCS = "gcs"
    AZURE = "azure"
    R2 = "r2"
    MINIO = "minio"

    @property
    def scheme(self) -> str:
        """The URL scheme of its buckets: ``s3://``, ``gs://``, ``az://``, ``r2://``, ``minio://``."""
        return _SCHEMES[self]

    @classmethod
    def of_scheme(cls, scheme: str) -> StoreKind | None:
        return next((kind for kind, known in _SCHEMES.items() if known == scheme.lower()), None)


_SCHEMES = {
    StoreKind.S3: "s3",
    StoreKind.GCS: "gs",
    StoreKind.AZURE: "az",
    StoreKind.R2: "r2",
    StoreKind.MINIO: "minio",
}
URL_SCHEMES = ("s3", "gs", "az", "r2", "minio", "https")
"""Schemes a ``file_mounts`` value may use (``https`` only for a single file, downloaded)."""

_BUCKET_NAME = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
"""S3's, GCS's and R2's common rule (3-63 lowercase letters, digits, dots, hyphens); Azure container
names are the same without dots, which ``Storage`` checks for that store."""


class BucketRef(BaseModel):
    """A place in a bucket: the store, the bucket and a prefix ("" for the whole bucket)."""

    model_config = ConfigDict(frozen=True)

    store: StoreKind
    bucket: str
    prefix: str = ""

    @property
    def url(self) -> str:
        path = f"/{self.prefix}" if self.prefix else ""
        return f"{self.store.scheme}://{self.bucket}{path}"


def bucket_url_of(url: str) -> BucketRef | None:
    """The bucket a ``s3://b/p``-style URL names, or None for any other string (https, a path)."""
    parts = urlsplit(url)
    kind = StoreKind.of_scheme(parts.scheme)
    if kind is None or not parts.netloc:
        return None
    return BucketRef(store=kind, bucket=parts.netloc, prefix=parts.path.strip("/"))


class Storage(BaseModel):
    """A storage dict of ``file_mounts`` (SkyPilot's storage schema, less its private fields)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str | None = None
    """The bucket to use, created when missing. Not given when ``source`` is a bucket URL."""
    source: str | list[str] | None = None
    """A local folder (or a list of local paths) uploaded to the bucket, or a bucket URL."""
    store: StoreKind | None = None
    """Where a named bucket lives; ``s3`` when not given (a bucket URL source names its own)."""
    persistent: bool = True
    """Keep the bucket on ``down``. A bucket skyhop did not create is always kept."""
    mode: StorageMode = StorageMode.MOUNT

    @field_validator("store", mode="before")
    @classmethod
    def _store_any_case(cls, value: object) -> object:
        # SkyPilot reads both enums case-insensitively (``case_insensitive_enum``).
        if isinstance(value, str) and value.lower() == "hf":
            raise ValueError(NO_HUGGING_FACE)
        if isinstance(value, str) and value.lower() in OTHER_SKYPILOT_STORES:
            stores = ", ".join(kind.value for kind in StoreKind)
            raise ValueError(
                f"store {value!r} is not supported yet; skyhop keeps buckets on {stores}: "
                "use one of them, or a bucket URL source (s3://, gs://, az://, r2://, minio://)"
            )
        return value.lower() if isinstance(value, str) else value

    @field_validator("name", mode="before")
    @classmethod
    def _empty_name_is_none(cls, value: object) -> object:
        return None if value == "" else value

    @field_validator("mode", mode="before")
    @classmethod
    def _mode_any_case(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value

    @field_validator("source", mode="before")
    @classmethod
    def _check_source(cls, value: object) -> object:
        if isinstance(value, list) and not value:
            raise ValueError("must name at least one local path")
        if isinstance(value, list):
            # Each path lands in the bucket under its own name, so two with one name would collide.
            names = [str(item).rstrip("/").rsplit("/", 1)[-1] for item in value]
            twice = sorted({name for name in names if names.count(name) > 1})
            if twice:
                raise ValueError(f"two paths named {twice[0]!r}: each lands in the bucket under its name")
        return value

    @model_validator(mode="after")
    def _check_spec(self) -> Storage:
        if self.name is not None:
            scheme = self.name.split("://")[0].lower() if "://" in self.name else None
            if scheme is not None:
                raise ValueError(
                    f"name must not start with {scheme}://; to use an existing bucket write it as "
                    f"source ({self.name}); to create one, give a plain name and store"
                )
        remote = self.bucket_url
        if self.source is None:
            if self.mode is StorageMode.COPY:
                raise ValueError("a new bucket has nothing to copy: COPY needs a source")
            if self.name is None:
                raise ValueError("give a name (a bucket to create or use) or a source")
        elif remote is None:
            if isinstance(self.source, str) and self.source.lower().startswith("hf://"):
                raise ValueError(f"source {self.source!r}: {NO_HUGGING_FACE}")
            if isinstance(self.source, str) and "://" in self.source:
                raise ValueError(
                    f"source {self.source!r} is not supported; use a local path or a bucket URL "
                    "(s3://, gs://, az://, r2://, minio://)"
                )
            if self.name is None:
                raise ValueError(
                    f"source {self.source!r} is a local path (not a bucket URL), and a local source "
                    "is uploaded to a bucket: give the bucket's name"
                )
            if isinstance(self.source, str) and self.source.endswith("/") and self.source != "/":
                raise ValueError(f"source {self.source!r} must not end with a slash")
        else:
            if self.name is not None:
                raise ValueError(
                    f"source {self.source} names the bucket already; drop name (or use a local source)"
                )
            if self.store is not None and self.store is not remote.store:
                raise ValueError(f"store {self.store.value} does not match source {self.source}")
        bucket = remote.bucket if remote is not None else self.name
        assert bucket is not None
        if not _BUCKET_NAME.fullmatch(bucket) or (self.kind is StoreKind.AZURE and "." in bucket):
            raise ValueError(
                f"bucket name {bucket!r} must be 3-63 lowercase letters, digits, hyphens"
                + ("" if self.kind is StoreKind.AZURE else " or dots")
                + ", starting and ending with a letter or digit"
            )
        return self

    @property
    def bucket_url(self) -> BucketRef | None:
        """The bucket ``source`` names, when it is a bucket URL."""
        return bucket_url_of(self.source) if isinstance(self.source, str) else None

    @property
    def local_sources(self) -> list[str]:
        """The local paths to upload (none when the source is a bucket or missing)."""
        if self.source is None or self.bucket_url is not None:
            return []
        return [self.source] if isinstance(self.source, str) else list(self.source)

    @property
    def kind(self) -> StoreKind:
        """The store: the source URL's, else ``store``, else ``s3``."""
        remote = self.bucket_url
        return remote.store if remote is not None else (self.store or StoreKind.S3)

    def bucket_ref(self) -> BucketRef:
        """Where the mount's objects are: the source URL, or the root of the named bucket."""
        remote = self.bucket_url
        if remote is not None:
            return remote
        assert self.name is not None
        return BucketRef(store=self.kind, bucket=self.name)
