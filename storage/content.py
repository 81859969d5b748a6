"""The content store: immutable objects named by their SHA-256, in a folder or an S3-compatible bucket.

Layout under the store's root (``file:///folder`` or ``s3://bucket[/prefix]``)::

    blobs/<aa>/<sha256>      one file's bytes
    manifests/<sha256>       one packed tree (``storage.manifest``), written after every blob it names

An object's name is its content's hash, so it never changes once written, and a writer that dies
leaves nothing a reader could take for whole: the folder store writes under a temporary name and
renames, an S3 PUT is atomic. A present manifest therefore means every blob it names is present.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from skyhop.providers.home import skyhop_home
from skyhop.storage.errors import (
    BucketNotFoundError,
    ContentNotFoundError,
    StorageError,
    StoreAccessError,
    StoreUnavailableError,
)

__all__ = [
    "ContentStore",
    "FolderContentStore",
    "S3ContentStore",
    "StoreConfig",
    "StoreCredentials",
    "blob_key",
    "content_cache",
    "load_store_config",
    "manifest_key",
    "open_store",
]

_THREADS = 16
"""Parallel requests to an S3 store (each a small object for a typical source tree)."""


def blob_key(digest: str) -> str:
    return f"blobs/{digest[:2]}/{digest}"


def manifest_key(digest: str) -> str:
    return f"manifests/{digest}"


class ContentStore(ABC):
    """Where packed trees live; every method is safe from several threads at once."""

    url: str
    threads: int = 1
    """How many requests are worth making at once."""
    revalidate_s: float = 0.0
    """How long a reader may trust what it last saw of a named object (``get_if_changed``) before
    asking again: nothing for a folder (a stat), a few seconds for a bucket (a request)."""

    @abstractmethod
    def has(self, key: str) -> bool:
        """Whether the object exists (one HEAD on S3)."""

    @abstractmethod
    def put_file(self, key: str, path: Path) -> None:
        """Store the file's bytes under ``key``."""

    @abstractmethod
    def put_bytes(self, key: str, data: bytes) -> None: ...

    @abstractmethod
    def put_if_absent(self, key: str, data: bytes) -> bool:
        """Store ``data`` under ``key`` unless something is there already; whether this call wrote it.

        For the few named objects (not content-addressed) that several workers may race to create:
        exactly one writer wins and every other reads the winner's.
        """

    @abstractmethod
    def get_bytes(self, key: str) -> bytes:
        """The object; ``ContentNotFoundError`` when it is not there."""

    @abstractmethod
    def get_file(self, key: str, dest: Path) -> None:
        """Write the object to ``dest`` (replacing it); ``ContentNotFoundError`` when it is not there."""

    @abstractmethod
    def get_if_changed(self, key: str, seen: str | None) -> tuple[str, bytes | None]:
        """(the object's version tag, its bytes, or None when the tag is still ``seen``).

        For the named objects that are rewritten (``storage/shared_state.py``): an unchanged object
        costs a stat or one bodiless request. ``ContentNotFoundError`` when it is not there.
        """

    @abstractmethod
    def list(self, folder: str, start_after: str | None = None) -> list[tuple[str, int]]:
        """The objects directly in ``folder`` (a key prefix ending in ``/``) named after
        ``start_after`` (a key), as (key, size) in key order; empty when there is none."""

    def missing(self, key: str) -> ContentNotFoundError:
        return ContentNotFoundError(
            "",
            f"{key} is not in the content store {self.url}: the client and the workers must use the "
            "same store (store.url in ~/.skyhop/config.yaml, or SKYHOP_STORE_URL)",
        )


class FolderContentStore(ContentStore):
    """A folder: the embedded default (``~/.skyhop/store/content``), or a shared mount."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.url = root.as_uri()
        self.threads = 4

    def has(self, key: str) -> bool:
        return (self.root / key).is_file()

    def put_file(self, key: str, path: Path) -> None:
        self._write(key, lambda tmp: shutil.copyfile(path, tmp))

    def put_bytes(self, key: str, data: bytes) -> None:
        self._write(key, lambda tmp: Path(tmp).write_bytes(data))

    def put_if_absent(self, key: str, data: bytes) -> bool:
        # link() fails when the name exists, like O_EXCL, and no reader sees a half-written object.
        try:
            self._write(key, lambda tmp: Path(tmp).write_bytes(data), publish=os.link)
        except FileExistsError:
            return False
        return True

    def _write(self, key: str, fill: Any, publish: Any = os.replace) -> None:
        dest = self.root / key
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=".tmp-")
        os.close(fd)
        try:
            fill(tmp)
            publish(tmp, dest)
        finally:
            Path(tmp).unlink(missing_ok=True)

    def get_bytes(self, key: str) -> bytes:
        try:
            return (self.root / key).read_bytes()
        except FileNotFoundError:
            raise self.missing(key) from None

    def get_file(self, key: str, dest: Path) -> None:
        try:
            shutil.copyfile(self.root / key, dest)
        except FileNotFoundError:
            raise self.missing(key) from None

    def get_if_changed(self, key: str, seen: str | None) -> tuple[str, bytes | None]:
        try:
            with (self.root / key).open("rb") as f:
                # A writer renames a whole new file in: its inode changes, so the tag does.
                stat = os.fstat(f.fileno())
                tag = f"{stat.st_ino}-{stat.st_size}-{stat.st_mtime_ns}"
                return tag, None if tag == seen else f.read()
        except FileNotFoundError:
            raise self.missing(key) from None

    def list(self, folder: str, start_after: str | None = None) -> list[tuple[str, int]]:
        after = "" if start_after is None else start_after.removeprefix(folder)
        try:
            entries = list(os.scandir(self.root / folder))
        except FileNotFoundError:
            return []
        found = []
        for entry in entries:
            if entry.name > after and not entry.name.startswith(".tmp-"):
                with contextlib.suppress(FileNotFoundError):  # removed since the scan
                    found.append((folder + entry.name, entry.stat().st_size))
        return sorted(found)


class S3ContentStore(ContentStore):
    """A bucket on S3 or any S3 API (MinIO, R2, moto) at ``endpoint_url``; boto3's credential chain."""

    revalidate_s = 5.0

    def __init__(
        self, bucket: str, prefix: str, endpoint_url: str | None, credentials: StoreCredentials | None = None
    ) -> None:
        from skyhop.providers.extras import ExtraMissingError, require_extra

        try:
            require_extra("aws", "an s3:// content store")
        except ExtraMissingError as exc:
            raise StoreUnavailableError("", str(exc)) from None
        import boto3
        from botocore.config import Config

        self.bucket, self.prefix = bucket, prefix.strip("/")
        self.url = f"s3://{bucket}" + (f"/{self.prefix}" if self.prefix else "")
        self.threads = _THREADS
        session = boto3.session.Session()
        config = Config(
            retries={"max_attempts": 4, "mode": "standard"},
            connect_timeout=10,
            read_timeout=60,
            max_pool_connections=_THREADS * 2,
        )
        keys = {} if credentials is None else credentials.boto3_arguments()
        self._client = session.client(
            "s3",
            region_name=session.region_name or "us-east-1",
            endpoint_url=endpoint_url,
            config=config,
            **keys,
        )

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def _call(self, key: str, call: Any) -> Any:
        from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

        try:
            return call()
        except NoCredentialsError:
            raise StoreAccessError(
                self.bucket, f"no S3 credentials for the content store {self.url}"
            ) from None
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code == "NoSuchBucket":
                raise BucketNotFoundError(
                    self.bucket, f"the content store's bucket {self.bucket} does not exist; create it"
                ) from None
            if code in ("NoSuchKey", "404", "NotFound"):
                raise self.missing(key) from None
            if code in ("AccessDenied", "403", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
                raise StoreAccessError(self.bucket, f"S3 refused access to {self.url}: {code}") from None
            raise StorageError(self.bucket, f"S3 {code} on {self.url}/{key}") from None
        except BotoCoreError as exc:
            raise StorageError(
                self.bucket, f"the content store {self.url} could not be reached: {exc}"
            ) from None

    def has(self, key: str) -> bool:
        try:
            self._call(key, lambda: self._client.head_object(Bucket=self.bucket, Key=self._key(key)))
        except ContentNotFoundError:
            # HEAD of a missing key in a missing bucket is a bare 404 too: tell them apart once.
            self._call("", lambda: self._client.head_bucket(Bucket=self.bucket))
            return False
        return True

    def put_file(self, key: str, path: Path) -> None:
        with path.open("rb") as body:
            self._call(
                key, lambda: self._client.put_object(Bucket=self.bucket, Key=self._key(key), Body=body)
            )

    def put_bytes(self, key: str, data: bytes) -> None:
        self._call(key, lambda: self._client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data))

    def put_if_absent(self, key: str, data: bytes) -> bool:
        from botocore.exceptions import ClientError

        def put() -> bool:
            try:
                self._client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data, IfNoneMatch="*")
            except ClientError as exc:
                # 412: the object exists; 409: a concurrent conditional write of it is in flight.
                code = str(exc.response.get("Error", {}).get("Code", ""))
                if code in ("PreconditionFailed", "ConditionalRequestConflict"):
                    return False
                raise
            return True

        return bool(self._call(key, put))

    def get_bytes(self, key: str) -> bytes:
        response = self._call(key, lambda: self._client.get_object(Bucket=self.bucket, Key=self._key(key)))
        data: bytes = response["Body"].read()
        return data

    def get_file(self, key: str, dest: Path) -> None:
        response = self._call(key, lambda: self._client.get_object(Bucket=self.bucket, Key=self._key(key)))
        with dest.open("wb") as out:
            shutil.copyfileobj(response["Body"], out, 1 << 20)

    def get_if_changed(self, key: str, seen: str | None) -> tuple[str, bytes | None]:
        from botocore.exceptions import ClientError

        def get() -> tuple[str, bytes | None]:
            conditions = {"IfNoneMatch": seen} if seen else {}
            try:
                response = self._client.get_object(Bucket=self.bucket, Key=self._key(key), **conditions)
            except ClientError as exc:
                if seen and str(exc.response.get("Error", {}).get("Code", "")) in ("304", "NotModified"):
                    return seen, None
                raise
            return str(response["ETag"]), response["Body"].read()

        result: tuple[str, bytes | None] = self._call(key, get)
        return result

    def list(self, folder: str, start_after: str | None = None) -> list[tuple[str, int]]:
        found: list[tuple[str, int]] = []
        strip = len(self._key(""))
        extra = {} if start_after is None else {"StartAfter": self._key(start_after)}
        pages = self._client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=self._key(folder), Delimiter="/", **extra
        )
        for page in self._call(folder, lambda: list(pages)):
            found.extend((item["Key"][strip:], int(item["Size"])) for item in page.get("Contents", []))
        return found


@dataclass(frozen=True)
class StoreCredentials:
    """S3 keys for the content store alone (``SKYHOP_STORE_ACCESS_KEY_ID``/``_SECRET_ACCESS_KEY``).

    A deployment's store (MinIO, R2) usually has keys of its own, while the same worker provisions on
    AWS with the AWS keys of boto3's chain: setting the store's as ``AWS_ACCESS_KEY_ID`` would hand
    them to the aws provider too. Read from the environment only, never from ``config.yaml``.
    """

    access_key_id: str
    secret_access_key: str = field(repr=False)

    def boto3_arguments(self) -> dict[str, str]:
        return {"aws_access_key_id": self.access_key_id, "aws_secret_access_key": self.secret_access_key}


def open_store(
    url: str, endpoint_url: str | None = None, credentials: StoreCredentials | None = None
) -> ContentStore:
    """The store at ``url``; ``endpoint_url`` and ``credentials`` are this machine's way to an S3 API."""
    parsed = urlparse(url)
    if parsed.scheme == "file" and parsed.path.startswith("/"):
        return FolderContentStore(Path(parsed.path))
    if parsed.scheme == "s3" and parsed.netloc:
        return S3ContentStore(parsed.netloc, parsed.path, endpoint_url, credentials)
    raise StoreUnavailableError(
        "", f"content store {url!r}: use file:///absolute/folder or s3://bucket[/prefix]"
    )


@dataclass(frozen=True)
class StoreConfig:
    """Where this machine packs task files, and how it reaches an S3-compatible store.

    ``store.url`` / ``SKYHOP_STORE_URL``: ``file:///folder`` or ``s3://bucket[/prefix]``; default
    the folder ``$SKYHOP_HOME/store/content`` (the embedded default: CLI and worker on one machine).
    ``store.endpoint_url`` / ``SKYHOP_STORE_ENDPOINT_URL``: an S3 API other than AWS's (MinIO, R2);
    default boto3's own (``~/.aws/config``). ``SKYHOP_STORE_ACCESS_KEY_ID`` and
    ``SKYHOP_STORE_SECRET_ACCESS_KEY`` (both or neither; environment only): the store's own keys;
    default boto3's credential chain. Workers read a task's store from its reference and use only
    their own endpoint and credentials.
    """

    url: str
    endpoint_url: str | None = None
    credentials: StoreCredentials | None = None

    def open(self) -> ContentStore:
        return self.reach(self.url)

    def reach(self, url: str) -> ContentStore:
        """The store at ``url`` (a task's reference) through this machine's endpoint and credentials."""
        return open_store(url, self.endpoint_url, self.credentials)


def load_store_config() -> StoreConfig:
    """The effective store settings (environment over ``config.yaml``'s ``store:`` section)."""
    section: dict[str, Any] = {}
    path = skyhop_home() / "config.yaml"
    if path.is_file():
        import yaml

        try:
            found = (yaml.safe_load(path.read_text()) or {}).get("store") or {}
        except (yaml.YAMLError, AttributeError):
            found = {}  # the CLI's own config check names what is wrong with the file
        section = found if isinstance(found, dict) else {}
    url = (
        os.environ.get("SKYHOP_STORE_URL")
        or section.get("url")
        or (skyhop_home() / "store" / "content").as_uri()
    )
    endpoint = os.environ.get("SKYHOP_STORE_ENDPOINT_URL") or section.get("endpoint_url") or None
    return StoreConfig(
        url=str(url), endpoint_url=None if endpoint is None else str(endpoint), credentials=_credentials()
    )


def _credentials() -> StoreCredentials | None:
    key_id = os.environ.get("SKYHOP_STORE_ACCESS_KEY_ID") or None
    secret = os.environ.get("SKYHOP_STORE_SECRET_ACCESS_KEY") or None
    if key_id is None and secret is None:
        return None
    if key_id is None or secret is None:
        raise StoreAccessError(
            "",
            "set both SKYHOP_STORE_ACCESS_KEY_ID and SKYHOP_STORE_SECRET_ACCESS_KEY for the content store, "
            "or neither (boto3's credential chain)",
        )
    return StoreCredentials(key_id, secret)


def content_cache() -> Path:
    """Where a worker keeps fetched trees, one folder per manifest."""
    return skyhop_home() / "cache" / "content"
