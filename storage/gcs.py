"""Google Cloud Storage buckets through google-cloud-storage, on the ``gcp`` provider's settings.

The project and credentials are the ones the Compute Engine provider uses (application default
credentials; ``GOOGLE_CLOUD_PROJECT`` or gcloud's ``core/project``), so a worker that launches on
GCP needs nothing more for its buckets. gcloud's ``api_endpoint_overrides/storage`` property
(``CLOUDSDK_API_ENDPOINT_OVERRIDES_STORAGE``, a JSON API base such as
``https://storage.googleapis.com/storage/v1/``) points both the SDK and the nodes' rclone elsewhere:
a private endpoint, or the tests' local server.

Ownership labels are bucket labels. A name another project holds answers ``create`` with 409 and
``get`` with 403: that is ``BucketNameTakenError``, while a 409 on a bucket this project can read is
a retried create (or the user's own bucket), which is left as it is.
"""

from __future__ import annotations

import contextlib
import json
import os
import urllib.parse
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from skyhop.providers.gcp import config
from skyhop.providers.gcp.api import SETUP_HINT
from skyhop.spec.storage import StoreKind
from skyhop.storage.errors import (
    BucketNameTakenError,
    BucketNotFoundError,
    StorageError,
    StoreAccessError,
    StoreUnavailableError,
)
from skyhop.storage.local_files import upload_keys
from skyhop.storage.stores import BucketRecord

__all__ = ["GcsStore", "endpoint_override"]

T = TypeVar("T")
_SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]
_EXPIRED = "2000-01-01T00:00:00Z"
"""An rclone token already expired: rclone refreshes it with the refresh token before first use."""


def endpoint_override() -> str | None:
    """The JSON API base URL gcloud's ``api_endpoint_overrides/storage`` names, if any."""
    return config.gcloud_property("api_endpoint_overrides", "storage")


class GcsStore:
    """Buckets of one GCP project."""

    kind = StoreKind.GCS
    upload_threads = 8
    chunk_bytes = 32 * 1024 * 1024
    """Resumable-upload chunk for files over the SDK's 8 MiB multipart limit (a 256 KiB multiple)."""

    def __init__(self) -> None:
        try:
            import google.auth
            from google.api_core.client_options import ClientOptions
            from google.cloud.storage import Client
        except ImportError:
            raise StoreUnavailableError(
                "", "gcs storage needs google-cloud-storage: pip install 'skyhop[gcp]'"
            ) from None
        try:
            credentials, adc_project = google.auth.default(scopes=_SCOPES)
        except Exception as exc:
            raise self._error("", exc) from None
        project = config.project_setting() or adc_project
        if not project:
            raise StoreAccessError("", f"no GCP project is set: {SETUP_HINT}")
        self.project: str = project
        self._override = endpoint_override()
        options = None
        if self._override:
            parts = urllib.parse.urlsplit(self._override)
            options = ClientOptions(api_endpoint=f"{parts.scheme}://{parts.netloc}")
        self._client = Client(project=project, credentials=credentials, client_options=options)

    def _call(self, bucket: str, call: Callable[[], T]) -> T:
        """Run SDK calls, their errors as ``storage.errors`` types."""
        try:
            return call()
        except StorageError:
            raise
        except Exception as exc:
            raise self._error(bucket, exc) from None

    def _error(self, bucket: str, exc: Exception) -> StorageError:
        """What an SDK error means for skyhop (a missing bucket, refused credentials, ...)."""
        import requests
        from google.api_core import exceptions as api
        from google.auth import exceptions as auth

        where = f"bucket {bucket}" if bucket else f"project {getattr(self, 'project', '?')}"
        if isinstance(exc, api.NotFound):
            return BucketNotFoundError(bucket, f"gcs bucket {bucket} does not exist")
        if isinstance(exc, api.Forbidden | api.Unauthorized):
            return StoreAccessError(bucket, f"gcs refused access to {where}: {exc.message}")
        if isinstance(exc, auth.DefaultCredentialsError | auth.RefreshError):
            return StoreAccessError(
                bucket, f"no usable GCP credentials ({str(exc).split('. ')[0]}): {SETUP_HINT}"
            )
        if isinstance(exc, api.GoogleAPICallError):
            return StorageError(bucket, f"gcs answered {exc.code} on {where}: {exc.message}")
        if isinstance(exc, requests.RequestException | auth.TransportError | api.RetryError):
            return StorageError(bucket, f"gcs could not be reached: {exc}")
        raise exc

    def _get(self, bucket: str) -> Any:
        return self._call(bucket, lambda: self._client.get_bucket(bucket))

    def exists(self, bucket: str) -> bool:
        try:
            self._get(bucket)
        except BucketNotFoundError:
            return False
        return True

    def create(self, bucket: str, region: str | None, labels: Mapping[str, str]) -> None:
        from google.api_core import exceptions as api

        new = self._client.bucket(bucket)
        new.labels = dict(labels)
        try:
            self._client.create_bucket(new, location=region)
        except api.Conflict:
            try:
                self._get(bucket)
            except StoreAccessError:
                raise BucketNameTakenError(
                    bucket, f"gcs bucket name {bucket} is taken by another project; choose another name"
                ) from None
        except Exception as exc:
            raise self._error(bucket, exc) from None

    def labels(self, bucket: str) -> dict[str, str] | None:
        try:
            return dict(self._get(bucket).labels or {})
        except BucketNotFoundError:
            return None

    def delete(self, bucket: str) -> bool:
        from google.api_core import exceptions as api

        def delete_object(blob: Any) -> None:
            with contextlib.suppress(api.NotFound):
                blob.delete()  # this generation: a versioned bucket's old versions go too

        try:
            blobs = self._call(bucket, lambda: list(self._client.list_blobs(bucket, versions=True)))
            with ThreadPoolExecutor(self.upload_threads) as pool:
                self._call(bucket, lambda: list(pool.map(delete_object, blobs)))
            self._call(bucket, lambda: self._client.bucket(bucket).delete())
        except BucketNotFoundError:
            return False
        return True

    def upload(self, source: Path, bucket: str, prefix: str) -> None:
        target = self._client.bucket(bucket)

        def put(item: tuple[Path, str]) -> None:
            path, key = item
            target.blob(key, chunk_size=self.chunk_bytes).upload_from_filename(str(path))

        files = upload_keys(source, bucket, prefix)
        with ThreadPoolExecutor(self.upload_threads) as pool:
            self._call(bucket, lambda: list(pool.map(put, files)))

    def list(self, label_filter: Mapping[str, str]) -> list[BucketRecord]:
        buckets = self._call("", lambda: list(self._client.list_buckets(project=self.project)))
        return [
            BucketRecord(
                name=found.name,
                store=self.kind,
                region=(found.location or "").lower() or None,
                created_at=found.time_created,
                labels=dict(found.labels or {}),
            )
            for found in buckets
            if all((found.labels or {}).get(k) == v for k, v in label_filter.items())
        ]

    def rclone_config(self) -> dict[str, str]:
        """rclone's ``google cloud storage`` remote, with the worker's own credentials: a service
        account's key, or a user's refresh token; on a GCE worker, the node's metadata server."""
        options = {
            "type": "google cloud storage",
            "project_number": self.project,
            "bucket_policy_only": "true",
        }
        key = _credentials_file()
        if key.get("type") == "service_account":
            options["service_account_credentials"] = json.dumps(key)
        elif key.get("type") == "authorized_user":
            token = {
                "access_token": "",
                "token_type": "Bearer",
                "refresh_token": key.get("refresh_token", ""),
            }
            token["expiry"] = _EXPIRED
            options.update(
                client_id=key["client_id"], client_secret=key["client_secret"], token=json.dumps(token)
            )
        else:
            options["env_auth"] = "true"
        if self._override:
            options["endpoint"] = self._override
        return options


def _credentials_file() -> dict[str, Any]:
    """The application default credentials file google-auth reads (``GOOGLE_APPLICATION_CREDENTIALS``,
    else gcloud's), or {} when the credentials come from elsewhere (a GCE metadata server)."""
    from google.auth import _cloud_sdk

    path = os.environ.get("GOOGLE_APPLICATION_CREDENTIALS") or str(
        _cloud_sdk.get_application_default_credentials_path()  # type: ignore[no-untyped-call]
    )
    try:
        info: dict[str, Any] = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}
    return info
