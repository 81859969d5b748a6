"""S3 buckets through boto3, and Cloudflare R2 as S3 at an endpoint.

Credentials, region and endpoint come from boto3's usual chain (environment, ``~/.aws/config``
with ``endpoint_url``, instance roles), as for the ``aws`` provider. R2 is S3 at
``https://<account_id>.r2.cloudflarestorage.com``: its endpoint is ``r2.endpoint`` (or
``r2.account_id``) in ``~/.skyhop/config.yaml`` or ``SKYHOP_R2_ENDPOINT``, its credentials the
``r2`` profile of ``~/.aws/credentials`` (SkyPilot's layout), else the default chain.

Ownership labels are bucket tags. Uploads use boto3's managed transfer (multipart, several
threads); downloads happen on nodes, through rclone (``storage.node_commands``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import yaml

from skyhop.providers.extras import ExtraMissingError, require_extra
from skyhop.providers.home import skyhop_home
from skyhop.spec.storage import StoreKind
from skyhop.storage.errors import (
    BucketNameTakenError,
    BucketNotFoundError,
    StorageError,
    StoreAccessError,
    StoreUnavailableError,
)
from skyhop.storage.stores import BucketRecord

__all__ = ["R2Store", "S3Store"]

T = TypeVar("T")
_UPLOAD_THREADS = 8
_MISSING = ("NoSuchBucket", "404", "NotFound")
_DENIED = (
    "AccessDenied",
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "ExpiredToken",
    "InvalidToken",
    "403",
)


class S3Store:
    """Buckets on S3 (or any S3 API at the configured endpoint)."""

    kind = StoreKind.S3
    _rclone_provider = "AWS"

    def __init__(self) -> None:
        try:
            require_extra("aws", f"{self.kind.value} storage")
        except ExtraMissingError as exc:
            raise StoreUnavailableError("", str(exc)) from None
        self._client = self._make_client()

    def _session(self) -> Any:
        import boto3

        return boto3.session.Session()

    def _endpoint(self) -> str | None:
        return None

    def _make_client(self) -> Any:
        from botocore.config import Config

        config = Config(
            retries={"max_attempts": 4, "mode": "standard"},
            connect_timeout=10,
            read_timeout=60,
            max_pool_connections=_UPLOAD_THREADS * 2,
        )
        session = self._session()
        region = session.region_name or "us-east-1"
        return session.client("s3", region_name=region, endpoint_url=self._endpoint(), config=config)

    def _call(self, bucket: str, call: Callable[[], T]) -> T:
        """Run one API call, its errors as ``storage.errors`` types."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return call()
        except (BotoCoreError, ClientError) as exc:
            raise self._error(bucket, exc) from None

    def _error(self, bucket: str, exc: Exception) -> StorageError:
        """What an SDK error means for skyhop (a missing bucket, refused credentials, ...)."""
        from botocore.exceptions import ClientError, NoCredentialsError

        if isinstance(exc, NoCredentialsError):
            return StoreAccessError(bucket, f"no {self.kind.value} credentials: {self._setup_hint}")
        if not isinstance(exc, ClientError):
            return StorageError(bucket, f"{self.kind.value} could not be reached: {exc}")
        code = _code(exc)
        message = str(exc.response.get("Error", {}).get("Message", "")) or code
        if code in _MISSING:
            return BucketNotFoundError(bucket, f"bucket {bucket} does not exist")
        if code in _DENIED:
            return StoreAccessError(
                bucket, f"{self.kind.value} refused access to {bucket or 'the store'}: {message}"
            )
        if code == "BucketAlreadyExists":
            return BucketNameTakenError(
                bucket, f"bucket name {bucket} is taken by another account; choose another name"
            )
        return StorageError(bucket, f"{self.kind.value} {code} on {bucket}: {message}")

    _setup_hint = "run 'aws configure', or set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"

    def exists(self, bucket: str) -> bool:
        try:
            self._call(bucket, lambda: self._client.head_bucket(Bucket=bucket))
        except BucketNotFoundError:
            return False
        return True

    def create(self, bucket: str, region: str | None, labels: Mapping[str, str]) -> None:
        if self.exists(bucket):
            return
        args: dict[str, Any] = {"Bucket": bucket}
        region = region or self._client.meta.region_name
        if region and region != "us-east-1" and self.kind is StoreKind.S3:
            args["CreateBucketConfiguration"] = {"LocationConstraint": region}
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self._client.create_bucket(**args)
        except ClientError as exc:
            # A retried create whose first attempt made the bucket: it is ours already.
            if _code(exc) != "BucketAlreadyOwnedByYou":
                raise self._error(bucket, exc) from None
        except BotoCoreError as exc:
            raise self._error(bucket, exc) from None
        tags = [{"Key": key, "Value": value} for key, value in labels.items()]
        self._call(bucket, lambda: self._client.put_bucket_tagging(Bucket=bucket, Tagging={"TagSet": tags}))

    def labels(self, bucket: str) -> dict[str, str] | None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            response = self._client.get_bucket_tagging(Bucket=bucket)
        except ClientError as exc:
            if _code(exc) == "NoSuchTagSet":
                return {}
            if _code(exc) in _MISSING:
                return None
            raise self._error(bucket, exc) from None
        except BotoCoreError as exc:
            raise self._error(bucket, exc) from None
        return {tag["Key"]: tag["Value"] for tag in response.get("TagSet", [])}

    def delete(self, bucket: str) -> bool:
        try:
            self._call(bucket, lambda: self._empty(bucket))
            self._call(bucket, lambda: self._client.delete_bucket(Bucket=bucket))
        except BucketNotFoundError:
            return False
        return True

    def _empty(self, bucket: str) -> None:
        paginator = self._client.get_paginator("list_object_versions")
        for page in paginator.paginate(Bucket=bucket):
            keys = [
                {"Key": item["Key"], "VersionId": item["VersionId"]}
                for item in page.get("Versions", []) + page.get("DeleteMarkers", [])
            ]
            if keys:
                self._client.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})

    def upload(self, source: Path, bucket: str, prefix: str) -> None:
        if not source.exists():
            raise StorageError(bucket, f"local source {source} does not exist")
        base = prefix.strip("/")
        files = list(_files(source))
        root = source if source.is_dir() else source.parent

        def put(path: Path) -> None:
            key = "/".join(part for part in (base, path.relative_to(root).as_posix()) if part)
            self._call(bucket, lambda: self._client.upload_file(str(path), bucket, key))

        with ThreadPoolExecutor(_UPLOAD_THREADS) as pool:
            list(pool.map(put, files))

    def list(self, label_filter: Mapping[str, str]) -> list[BucketRecord]:
        response = self._call("", self._client.list_buckets)
        records = []
        for item in response.get("Buckets", []):
            labels = self.labels(item["Name"])
            if labels is None or any(labels.get(k) != v for k, v in label_filter.items()):
                continue
            records.append(
                BucketRecord(
                    name=item["Name"], store=self.kind, created_at=item.get("CreationDate"), labels=labels
                )
            )
        return records

    def rclone_config(self) -> dict[str, str]:
        credentials = self._session().get_credentials()
        if credentials is None:
            raise StoreAccessError("", f"no {self.kind.value} credentials: {self._setup_hint}")
        frozen = credentials.get_frozen_credentials()
        config = {
            "type": "s3",
            "provider": self._rclone_provider,
            "access_key_id": frozen.access_key,
            "secret_access_key": frozen.secret_key,
            "region": self._client.meta.region_name or "us-east-1",
        }
        if frozen.token:
            config["session_token"] = frozen.token
        endpoint = self._client.meta.endpoint_url
        if endpoint and not endpoint.endswith(".amazonaws.com"):
            # A non-AWS endpoint (moto, MinIO, R2): rclone's generic S3, path-style addressing.
            config.update(endpoint=endpoint, provider="Other", force_path_style="true")
        return config


class _EndpointStore(S3Store):
    """S3's API at an endpoint of the store's own: its keys in the AWS profile named after it (else
    the usual chain), its endpoint in ``SKYHOP_<KIND>_ENDPOINT`` or ``config.yaml``'s section."""

    _path_style = True
    """Address buckets in the path (``endpoint/bucket``), as a self-hosted server needs."""

    def _session(self) -> Any:
        import boto3

        profile = self.kind.value
        profiles = boto3.session.Session().available_profiles
        return boto3.session.Session(profile_name=profile if profile in profiles else None)

    def _section(self) -> dict[str, Any]:
        config_file = skyhop_home() / "config.yaml"
        if not config_file.exists():
            return {}
        return (yaml.safe_load(config_file.read_text()) or {}).get(self.kind.value) or {}

    def _endpoint(self) -> str:
        endpoint = os.environ.get(f"SKYHOP_{self.kind.name}_ENDPOINT") or self._section().get("endpoint")
        if endpoint:
            return str(endpoint)
        return self._default_endpoint()

    def _default_endpoint(self) -> str:
        raise StoreUnavailableError(
            "",
            f"{self.kind.value} needs its endpoint: set {self.kind.value}.endpoint in ~/.skyhop/config.yaml",
        )

    def rclone_config(self) -> dict[str, str]:
        config = super().rclone_config()
        config.update(provider=self._rclone_provider, endpoint=self._endpoint())
        if not self._path_style:
            config.pop("force_path_style", None)
        return config


class R2Store(_EndpointStore):
    """Cloudflare R2: S3's API at the account's endpoint."""

    kind = StoreKind.R2
    _rclone_provider = "Cloudflare"
    _setup_hint = "put R2's keys in the [r2] profile of ~/.aws/credentials"
    _path_style = False

    def _default_endpoint(self) -> str:
        account = self._section().get("account_id")
        if account:
            return f"https://{account}.r2.cloudflarestorage.com"
        raise StoreUnavailableError(
            "", "r2 needs its endpoint: set r2.account_id (or r2.endpoint) in ~/.skyhop/config.yaml"
        )


class MinioStore(_EndpointStore):
    """MinIO (or any self-hosted S3 server): S3's API at the server's endpoint (``minio://bucket``)."""

    kind = StoreKind.MINIO
    _rclone_provider = "Minio"
    _setup_hint = "put MinIO's keys in the [minio] profile of ~/.aws/credentials"


def _files(source: Path) -> Iterator[Path]:
    if source.is_file():
        yield source
        return
    for path in sorted(source.rglob("*")):
        if path.is_file():
            yield path


def _code(exc: Any) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))
