"""Azure Blob Storage containers through azure-storage-blob, in one configured storage account.

A ``StoreKind.AZURE`` bucket is a container of the account named, as the Azure CLI names it, by
``AZURE_STORAGE_CONNECTION_STRING`` (which also carries a ``BlobEndpoint`` for a storage emulator or
the tests' local server), else by ``AZURE_STORAGE_ACCOUNT`` with ``AZURE_STORAGE_KEY``, or with the
credentials the ``azure`` provider uses (``DefaultAzureCredential``: ``az login``, a service
principal's ``AZURE_CLIENT_*`` variables, a managed identity).

Ownership labels are container metadata. Container names are the account's own, so an existing
name is this account's: ``create`` leaves it as it is. Delete Container removes the blobs with the
container, so no emptying pass is needed; the name stays unusable while Azure finishes the delete
(``ContainerBeingDeleted``), which ``create`` reports as a failure worth retrying.
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from skyhop.providers.azure.api import SETUP_HINT
from skyhop.spec.storage import StoreKind
from skyhop.storage.errors import (
    BucketNotFoundError,
    StorageError,
    StoreAccessError,
    StoreUnavailableError,
)
from skyhop.storage.local_files import upload_keys
from skyhop.storage.stores import BucketRecord

__all__ = ["AzureBlobStore"]

T = TypeVar("T")
_ACCOUNT_HINT = (
    "set AZURE_STORAGE_ACCOUNT (and AZURE_STORAGE_KEY, or Azure credentials: "
    f"{SETUP_HINT}), or AZURE_STORAGE_CONNECTION_STRING"
)
_PUBLIC_SUFFIX = ".blob.core.windows.net"


class AzureBlobStore:
    """Containers of one storage account."""

    kind = StoreKind.AZURE
    upload_threads = 8
    single_put_bytes = 64 * 1024 * 1024
    """Files up to this size go up in one Put Blob; larger ones as blocks (Put Block, Put Block List)."""
    block_bytes = 8 * 1024 * 1024
    sas_lifetime = timedelta(days=7)
    """How long a node's SAS URL lasts, where rclone gets one (an endpoint other than Azure's own)."""

    def __init__(self) -> None:
        try:
            from azure.storage.blob import BlobServiceClient
        except ImportError:
            raise StoreUnavailableError(
                "", "azure storage needs azure-storage-blob: pip install 'skyhop[azure]'"
            ) from None
        sizes: dict[str, Any] = {
            "max_single_put_size": self.single_put_bytes,
            "max_block_size": self.block_bytes,
        }
        connection = os.environ.get("AZURE_STORAGE_CONNECTION_STRING")
        account = os.environ.get("AZURE_STORAGE_ACCOUNT")
        if connection:
            try:
                self._service = BlobServiceClient.from_connection_string(connection, **sizes)
            except ValueError as exc:
                raise StoreUnavailableError(
                    "", f"AZURE_STORAGE_CONNECTION_STRING is not usable: {exc}"
                ) from None
        elif account:
            credential: Any = os.environ.get("AZURE_STORAGE_KEY")
            if not credential:
                from azure.identity import DefaultAzureCredential

                credential = DefaultAzureCredential()
            self._service = BlobServiceClient(f"https://{account}{_PUBLIC_SUFFIX}", credential, **sizes)
        else:
            raise StoreUnavailableError("", f"azure storage needs a storage account: {_ACCOUNT_HINT}")
        self.account: str = self._service.account_name or ""

    def _call(self, bucket: str, call: Callable[[], T]) -> T:
        """Run SDK calls, their errors as ``storage.errors`` types."""
        from azure.core.exceptions import AzureError

        try:
            return call()
        except AzureError as exc:
            raise self._error(bucket, exc) from None

    def _error(self, bucket: str, exc: Exception) -> StorageError:
        """What an SDK error means for skyhop (a missing container, refused credentials, ...)."""
        from azure.core.exceptions import ClientAuthenticationError, HttpResponseError, ResourceNotFoundError

        where = f"container {bucket}" if bucket else "the account"
        if isinstance(exc, ResourceNotFoundError):
            return BucketNotFoundError(
                bucket, f"azure container {bucket} does not exist in account {self.account}"
            )
        if isinstance(exc, ClientAuthenticationError) or getattr(exc, "status_code", None) in (401, 403):
            return StoreAccessError(
                bucket, f"azure refused access to {where} of {self.account}: {_reason(exc)}; {_ACCOUNT_HINT}"
            )
        if isinstance(exc, HttpResponseError):
            return StorageError(bucket, f"azure answered {exc.status_code} on {where}: {_reason(exc)}")
        return StorageError(bucket, f"azure account {self.account} could not be reached: {_reason(exc)}")

    def exists(self, bucket: str) -> bool:
        return self.labels(bucket) is not None

    def create(self, bucket: str, region: str | None, labels: Mapping[str, str]) -> None:
        """Create the container (``region`` is the account's: containers have none of their own)."""
        from azure.core.exceptions import AzureError, ResourceExistsError

        try:
            self._service.create_container(bucket, metadata=dict(labels))
        except ResourceExistsError as exc:
            if getattr(exc, "error_code", None) == "ContainerBeingDeleted":
                raise StorageError(
                    bucket, f"azure container {bucket} is still being deleted; it can be created again soon"
                ) from None
        except AzureError as exc:
            raise self._error(bucket, exc) from None

    def labels(self, bucket: str) -> dict[str, str] | None:
        container = self._service.get_container_client(bucket)
        try:
            properties = self._call(bucket, container.get_container_properties)
        except BucketNotFoundError:
            return None
        return dict(properties.metadata or {})

    def delete(self, bucket: str) -> bool:
        try:
            self._call(bucket, lambda: self._service.delete_container(bucket))
        except BucketNotFoundError:
            return False
        return True

    def upload(self, source: Path, bucket: str, prefix: str) -> None:
        container = self._service.get_container_client(bucket)

        def put(item: tuple[Path, str]) -> None:
            path, key = item
            with path.open("rb") as data:
                container.upload_blob(key, data, overwrite=True, max_concurrency=2)

        files = upload_keys(source, bucket, prefix)
        with ThreadPoolExecutor(self.upload_threads) as pool:
            self._call(bucket, lambda: list(pool.map(put, files)))

    def list(self, label_filter: Mapping[str, str]) -> list[BucketRecord]:
        containers = self._call("", lambda: list(self._service.list_containers(include_metadata=True)))
        return [
            BucketRecord(name=found.name, store=self.kind, labels=dict(found.metadata or {}))
            for found in containers
            if all((found.metadata or {}).get(k) == v for k, v in label_filter.items())
        ]

    def rclone_config(self) -> dict[str, str]:
        """rclone's ``azureblob`` remote. With the account key: the key on Azure's public endpoint;
        elsewhere (a sovereign cloud, an emulator) an account SAS URL, the only way rclone takes a
        whole service URL. Without a key (the worker signs in with Azure credentials): the node's
        managed identity, since rclone as Debian ships it (1.60) takes a service principal only as
        a file, and credentials never go onto a node's disk."""
        key = getattr(self._service.credential, "account_key", None)
        if not key:
            return {"type": "azureblob", "account": self.account, "use_msi": "true"}
        service_url = self._service.url.rstrip("/")
        if (urllib.parse.urlsplit(service_url).hostname or "").endswith(_PUBLIC_SUFFIX):
            return {"type": "azureblob", "account": self.account, "key": key}
        return {"type": "azureblob", "sas_url": f"{service_url}?{self._account_sas(key)}"}

    def _account_sas(self, key: str) -> str:
        from azure.storage.blob import AccountSasPermissions, ResourceTypes, generate_account_sas

        return generate_account_sas(
            self.account,
            key,
            ResourceTypes(service=True, container=True, object=True),
            AccountSasPermissions(read=True, write=True, delete=True, list=True, add=True, create=True),
            expiry=datetime.now(UTC) + self.sas_lifetime,
        )


def _reason(exc: Any) -> str:
    """The service's error code and the first line of its message."""
    message = str(getattr(exc, "message", "") or exc).splitlines()[0]
    code = getattr(exc, "error_code", None)
    code = getattr(code, "value", code)  # a StorageErrorCode, or the code the service sent
    return f"{code}: {message}" if code else message
