"""The azure bucket store through azure-storage-blob, against a local Blob service checking each request."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.parse
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import requests

from skyhop.storage import (
    CREATED_LABEL,
    BucketNotFoundError,
    StorageError,
    StoreAccessError,
    StoreUnavailableError,
    ownership_labels,
)
from skyhop.storage.azure_blob import AzureBlobStore
from tests.providers.fake_azure_blob import FakeBlobService
from tests.sdk_blocker import blocked_env
from tests.storage.rclone_remote import check_rclone_round_trip, needs_rclone, sample_tree

ACCOUNT = "skyhoptest"


@pytest.fixture
def blob(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeBlobService]:
    fake = FakeBlobService(ACCOUNT)
    fake.start()
    for name in ("AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_KEY", "AZURE_CLIENT_SECRET"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", fake.connection_string)
    yield fake
    fake.stop()
    assert fake.violations == []


def test_create_labels_list_and_a_retried_create(blob: FakeBlobService) -> None:
    store = AzureBlobStore()
    assert not store.exists("ckpts-1") and store.labels("ckpts-1") is None
    store.create("ckpts-1", "eastus", ownership_labels("train", persistent=False))
    store.create("ckpts-1", "eastus", ownership_labels("other", persistent=True))
    assert store.exists("ckpts-1")
    assert store.labels("ckpts-1") == ownership_labels("train", persistent=False)
    blob.containers["users-data"], blob.blobs["users-data"] = {"team": "ml"}, {}
    blob.page_size = 1
    (record,) = store.list({CREATED_LABEL: "true"})
    assert (record.name, record.cluster, record.persistent) == ("ckpts-1", "train", False)
    assert [r.name for r in store.list({})] == ["ckpts-1", "users-data"]


def test_an_existing_container_of_the_user_is_used_as_it_is(blob: FakeBlobService) -> None:
    """ContainerAlreadyExists: left unlabelled, so cleanup sees it is the user's."""
    blob.containers["users-data"], blob.blobs["users-data"] = {"team": "ml"}, {}
    store = AzureBlobStore()
    store.create("users-data", None, ownership_labels("train", persistent=False))
    assert store.labels("users-data") == {"team": "ml"}
    (record,) = store.list({})
    assert not record.created_by_skyhop and record.persistent


def test_upload_uses_put_blob_and_blocks_for_a_large_file(
    blob: FakeBlobService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(AzureBlobStore, "single_put_bytes", 1024 * 1024)
    monkeypatch.setattr(AzureBlobStore, "block_bytes", 512 * 1024)
    store = AzureBlobStore()
    store.create("data-1", None, {})
    big = bytes(range(251)) * (3 * 1024 * 1024 // 251 + 1)
    (sample_tree(tmp_path / "src") / "big.bin").write_bytes(big)
    store.upload(tmp_path / "src", "data-1", "run/1/")
    store.upload(tmp_path / "src" / "a.txt", "data-1", "")
    objects = blob.blobs["data-1"]
    assert sorted(objects) == ["a.txt", "run/1/a.txt", "run/1/big.bin", "run/1/sub/b.bin"]
    assert objects["run/1/big.bin"] == big and objects["run/1/sub/b.bin"] == bytes(range(256)) * 10
    blocks = [c for c in blob.called("PUT", "/big.bin") if c.query.get("comp") == "block"]
    assert len(blocks) == 7 and len(blob.called("PUT", "/a.txt")) == 2
    container = store._service.get_container_client("data-1")
    assert [b.name for b in container.list_blobs(name_starts_with="run/")] == sorted(objects)[1:]
    assert container.download_blob("a.txt").readall() == b"alpha"


def test_upload_to_a_missing_container_or_from_a_missing_source(
    blob: FakeBlobService, tmp_path: Path
) -> None:
    store = AzureBlobStore()
    with pytest.raises(BucketNotFoundError, match="container nope-1 does not exist in account skyhoptest"):
        store.upload(sample_tree(tmp_path / "src"), "nope-1", "")
    with pytest.raises(StorageError, match="does not exist"):
        store.upload(tmp_path / "missing", "nope-1", "")


def test_delete_takes_the_blobs_and_a_missing_container_is_fine(
    blob: FakeBlobService, tmp_path: Path
) -> None:
    store = AzureBlobStore()
    blob.deleting_for = 1
    store.create("scratch-1", None, ownership_labels("train", persistent=False))
    store.upload(sample_tree(tmp_path / "src"), "scratch-1", "x")
    assert store.delete("scratch-1") is True
    assert "scratch-1" not in blob.containers
    assert store.delete("scratch-1") is False and store.labels("scratch-1") is None
    with pytest.raises(StorageError, match="still being deleted") as raised:
        store.create("scratch-1", None, {})
    assert type(raised.value) is StorageError  # retried by the activity, unlike a missing container
    store.create("scratch-1", None, {})
    assert store.labels("scratch-1") == {}


def test_a_read_only_key_and_a_wrong_key_are_access_errors(
    blob: FakeBlobService, monkeypatch: pytest.MonkeyPatch
) -> None:
    blob.read_only = True
    with pytest.raises(StoreAccessError, match="AuthorizationPermissionMismatch"):
        AzureBlobStore().create("ckpts-1", None, {})
    wrong = blob.connection_string.replace(blob.key, "d3Jvbmc=")
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", wrong)
    with pytest.raises(StoreAccessError, match="AuthenticationFailed"):
        AzureBlobStore().list({})
    assert blob.violations == ["GET /skyhoptest/: the Shared Key signature does not match"]
    blob.violations.clear()


def test_without_an_account_the_store_says_what_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_ACCOUNT"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(StoreUnavailableError, match="set AZURE_STORAGE_ACCOUNT"):
        AzureBlobStore()


def test_rclone_gets_the_key_on_azure_and_a_sas_url_elsewhere(
    blob: FakeBlobService, monkeypatch: pytest.MonkeyPatch
) -> None:
    sas_url = AzureBlobStore().rclone_config().pop("sas_url")
    service, _, sas = sas_url.partition("?")
    query = dict(urllib.parse.parse_qsl(sas))
    assert service == f"{blob.url}/{ACCOUNT}" and (query["ss"], query["srt"], query["sp"]) == (
        "b",
        "sco",
        "rwdlac",
    )
    expiry = datetime.fromisoformat(query["se"].replace("Z", "+00:00"))
    assert timedelta(days=6) < expiry - datetime.now(UTC) <= AzureBlobStore.sas_lifetime
    monkeypatch.delenv("AZURE_STORAGE_CONNECTION_STRING")
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT", "acct1")
    monkeypatch.setenv("AZURE_STORAGE_KEY", blob.key)
    assert AzureBlobStore().rclone_config() == {"type": "azureblob", "account": "acct1", "key": blob.key}


def test_rclone_without_a_key_uses_the_nodes_managed_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AZURE_STORAGE_CONNECTION_STRING", raising=False)
    monkeypatch.delenv("AZURE_STORAGE_KEY", raising=False)
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT", "acct1")
    assert AzureBlobStore().rclone_config() == {"type": "azureblob", "account": "acct1", "use_msi": "true"}


def _signed(store: AzureBlobStore, method: str, path: str, headers: dict[str, str]) -> dict[str, str]:
    """Headers of a request the SDK's own Shared Key policy signed."""
    from azure.core.pipeline import PipelineContext, PipelineRequest
    from azure.core.pipeline.transport import HttpRequest
    from azure.storage.blob._shared.authentication import SharedKeyCredentialPolicy

    request = HttpRequest(method, f"{store._service.url.rstrip('/')}{path}", headers=headers)
    request.headers.update({"x-ms-version": "2025-01-05", "x-ms-date": "Thu, 03 Dec 2026 17:00:00 GMT"})
    key = store._service.credential.account_key
    SharedKeyCredentialPolicy(store.account, key).on_request(PipelineRequest(request, PipelineContext(None)))
    return dict(request.headers)


_BAD_REQUESTS = [
    ("PUT", "/Bad_Name?restype=container", {}, "invalid characters"),
    ("PUT", "/a--b?restype=container", {}, "invalid characters"),
    ("PUT", "/ok-1?restype=container", {"x-ms-meta-skyhop-created": "true"}, "metadata name"),
    ("PUT", "/ok-1", {}, "without restype"),
    ("PUT", "/data-1/x", {"Content-Length": "1"}, "x-ms-blob-type"),
    ("PUT", "/data-1/x?comp=block&blockid=not*base64", {"Content-Length": "1"}, "blockid"),
    ("GET", "", {}, "comp=list"),
    ("GET", "/data-1?restype=container&comp=stats", {}, "comp 'stats'"),
    ("GET", "/data-1", {}, "without restype"),
]


@pytest.mark.parametrize(("method", "path", "headers", "rule"), _BAD_REQUESTS)
def test_the_fake_refuses_what_the_blob_service_refuses(
    blob: FakeBlobService, method: str, path: str, headers: dict[str, str], rule: str
) -> None:
    """Each rule of the fake fails a wrong request, so a store that sent one would fail its test."""
    store = AzureBlobStore()
    store.create("data-1", None, {})
    body = b"x" if headers.get("Content-Length") == "1" else None
    signed = _signed(store, method, path, headers)
    reply = requests.request(
        method, f"{store._service.url.rstrip('/')}{path}", headers=signed, data=body, timeout=10
    )
    assert reply.status_code == 400 and len(blob.violations) == 1 and rule in blob.violations[0]
    blob.violations.clear()


@pytest.mark.parametrize(
    ("change", "rule"),
    [
        ({"Authorization": "Bearer x"}, "not SharedKey"),
        ({"x-ms-date": "yesterday"}, "HTTP date"),
        ({"x-ms-meta-extra": "added after signing"}, "signature does not match"),
        ({"x-ms-version": ""}, "no x-ms-version"),
    ],
)
def test_the_fake_checks_the_shared_key(blob: FakeBlobService, change: dict[str, Any], rule: str) -> None:
    store = AzureBlobStore()
    signed = {**_signed(store, "GET", "/?comp=list", {}), **change}
    reply = requests.get(f"{store._service.url.rstrip('/')}/?comp=list", headers=signed, timeout=10)
    assert reply.status_code == 403 and reply.headers["x-ms-error-code"] == "AuthenticationFailed"
    assert len(blob.violations) == 1 and rule in blob.violations[0]
    blob.violations.clear()


@needs_rclone
def test_rclone_on_a_node_reads_and_writes_the_bucket(blob: FakeBlobService, tmp_path: Path) -> None:
    """The remote ``rclone_config`` describes is one rclone can use: it lists, reads and writes."""
    check_rclone_round_trip(AzureBlobStore(), tmp_path)
    assert blob.blobs["data-1"]["out/ckpt.pt"] == b"weights"


@pytest.mark.parametrize(
    ("lifetime", "tamper", "rule"),
    [
        (timedelta(hours=-1), {}, "expired"),
        (timedelta(hours=1), {"sp": "rl"}, "signature does not match"),
        (timedelta(hours=1), {"sig": "AAAA"}, "signature does not match"),
    ],
)
def test_the_fake_checks_the_sas(
    blob: FakeBlobService,
    lifetime: timedelta,
    tamper: dict[str, str],
    rule: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(AzureBlobStore, "sas_lifetime", lifetime)
    store = AzureBlobStore()
    sas = {**dict(urllib.parse.parse_qsl(store._account_sas(blob.key))), **tamper}
    url = f"{store._service.url.rstrip('/')}/?comp=list&{urllib.parse.urlencode(sas)}"
    reply = requests.get(url, headers={"x-ms-version": "2020-10-02"}, timeout=10)
    assert reply.status_code == 403 and len(blob.violations) == 1 and rule in blob.violations[0]
    blob.violations.clear()


def test_without_the_sdk_the_store_names_the_extra(tmp_path: Path) -> None:
    code = (
        "from skyhop.storage import StorageError\n"
        "from skyhop.storage.azure_blob import AzureBlobStore\n"
        "try:\n"
        "    AzureBlobStore()\n"
        "except StorageError as exc:\n"
        "    print(type(exc).__name__, exc)\n"
    )
    env = blocked_env(tmp_path / "blocker", {**os.environ, "AZURE_STORAGE_ACCOUNT": "acct1"})
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert (
        done.stdout.strip()
        == "StoreUnavailableError azure storage needs azure-storage-blob: pip install 'skyhop[azure]'"
    ), done.stderr


def test_the_fake_checks_block_lists(blob: FakeBlobService) -> None:
    store = AzureBlobStore()
    store.create("data-1", None, {})
    base = store._service.url.rstrip("/") + "/data-1/x"

    def put(query: str, body: bytes) -> int:
        headers = _signed(store, "PUT", f"/data-1/x{query}", {"Content-Length": str(len(body))})
        return requests.put(base + query, data=body, headers=headers, timeout=10).status_code

    assert put("?comp=block&blockid=QUFB", b"a") == 201
    assert put("?comp=block&blockid=QkJCQkJC", b"b") == 400
    assert "differ in length" in blob.violations.pop()
    assert put("?comp=blocklist", b"<BlockList><Latest>Q0ND</Latest></BlockList>") == 400
    assert "never put" in blob.violations.pop()
