"""The gcs bucket store through google-cloud-storage, against a local Cloud Storage checking each request."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from skyhop.spec.storage import StoreKind
from skyhop.storage import (
    CREATED_LABEL,
    BucketNameTakenError,
    BucketNotFoundError,
    StorageError,
    StoreAccessError,
    get_store,
    ownership_labels,
)
from skyhop.storage.gcs import GcsStore
from tests.providers.fake_gcp import signed_in
from tests.providers.fake_gcs import FakeGCS
from tests.sdk_blocker import blocked_env
from tests.storage.rclone_remote import check_rclone_round_trip, needs_rclone, sample_tree

PROJECT = "skyhop-test"


@pytest.fixture
def gcs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGCS]:
    fake = FakeGCS(PROJECT, tmp_path / "key.json")
    signed_in(fake, tmp_path, monkeypatch, STORAGE="/storage/v1/")
    monkeypatch.delenv("STORAGE_EMULATOR_HOST", raising=False)
    yield fake
    fake.stop()
    assert fake.violations == []


def test_create_labels_list_and_a_retried_create(gcs: FakeGCS) -> None:
    store = get_store(StoreKind.GCS)
    assert isinstance(store, GcsStore)
    assert not store.exists("ckpts-1") and store.labels("ckpts-1") is None
    store.create("ckpts-1", "us-central1", ownership_labels("train", persistent=False))
    store.create("ckpts-1", "us-central1", ownership_labels("other", persistent=True))
    assert store.exists("ckpts-1")
    assert store.labels("ckpts-1") == ownership_labels("train", persistent=False)
    assert gcs.buckets["ckpts-1"]["location"] == "US-CENTRAL1"
    gcs.own("users-data", {"team": "ml"})
    gcs.page_size = 1
    (record,) = store.list({CREATED_LABEL: "true"})
    assert (record.name, record.region, record.cluster, record.persistent) == (
        "ckpts-1",
        "us-central1",
        "train",
        False,
    )
    assert [r.name for r in store.list({})] == ["ckpts-1", "users-data"]
    assert len(gcs.called("POST", "/storage/v1/b")) == 2


def test_an_existing_bucket_of_the_user_is_used_as_it_is(gcs: FakeGCS) -> None:
    """A 409 on a bucket this project can read: left unlabelled, so cleanup sees it is the user's."""
    gcs.own("users-data", {"team": "ml"})
    store = GcsStore()
    store.create("users-data", None, ownership_labels("train", persistent=False))
    assert store.labels("users-data") == {"team": "ml"}
    (record,) = store.list({})
    assert not record.created_by_skyhop and record.persistent


def test_a_name_another_project_holds_is_taken(gcs: FakeGCS) -> None:
    gcs.foreign.add("imagenet")
    store = GcsStore()
    with pytest.raises(BucketNameTakenError, match="taken by another project"):
        store.create("imagenet", None, ownership_labels("train", persistent=True))
    with pytest.raises(StoreAccessError, match="does not have storage.buckets.get"):
        store.exists("imagenet")
    assert "imagenet" not in gcs.buckets


def test_upload_uses_multipart_and_chunked_resumable_uploads(gcs: FakeGCS, tmp_path: Path) -> None:
    store = GcsStore()
    store.chunk_bytes = 1024 * 1024
    store.create("data-1", None, {})
    big = bytes(range(251)) * (9 * 1024 * 1024 // 251 + 1)  # over the SDK's 8 MiB multipart limit
    (sample_tree(tmp_path / "src") / "big.bin").write_bytes(big)
    store.upload(tmp_path / "src", "data-1", "run/1/")
    store.upload(tmp_path / "src" / "a.txt", "data-1", "")
    objects = gcs.objects["data-1"]
    assert sorted(objects) == ["a.txt", "run/1/a.txt", "run/1/big.bin", "run/1/sub/b.bin"]
    assert objects["run/1/big.bin"] == big and objects["run/1/sub/b.bin"] == bytes(range(256)) * 10
    multipart = [c for c in gcs.called("POST", "/upload/") if c.query["uploadType"] == "multipart"]
    chunks = gcs.called("PUT", "/upload/")
    assert len(multipart) == 3 and len(chunks) == 10
    blob = store._client.bucket("data-1").blob("run/1/a.txt")
    assert blob.download_as_bytes() == b"alpha"  # objects.get alt=media


def test_upload_to_a_missing_bucket_or_from_a_missing_source(gcs: FakeGCS, tmp_path: Path) -> None:
    store = GcsStore()
    with pytest.raises(BucketNotFoundError, match="gcs bucket nope-1 does not exist"):
        store.upload(sample_tree(tmp_path / "src"), "nope-1", "")
    store.create("data-1", None, {})
    with pytest.raises(StorageError, match="does not exist"):
        store.upload(tmp_path / "missing", "data-1", "")


def test_delete_empties_the_bucket_first_and_a_missing_one_is_fine(gcs: FakeGCS, tmp_path: Path) -> None:
    store = GcsStore()
    gcs.page_size = 2
    store.create("scratch-1", None, ownership_labels("train", persistent=False))
    store.upload(sample_tree(tmp_path / "src"), "scratch-1", "x")
    store.upload(tmp_path / "src", "scratch-1", "y")
    assert len(gcs.objects["scratch-1"]) == 4
    assert store.delete("scratch-1") is True
    assert "scratch-1" not in gcs.buckets and len(gcs.called("DELETE", "/o/")) == 4
    assert store.delete("scratch-1") is False
    assert store.labels("scratch-1") is None


def test_refused_credentials_are_access_errors(gcs: FakeGCS) -> None:
    gcs.denied = True
    store = GcsStore()
    with pytest.raises(StoreAccessError, match="storage.buckets.create"):
        store.create("ckpts-1", None, {})
    with pytest.raises(StoreAccessError, match="storage.buckets.list"):
        store.list({})


def test_without_a_project_the_store_says_how_to_set_one(
    gcs: FakeGCS, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = json.loads(Path(gcs.key_file).read_text())
    del key["project_id"]
    Path(gcs.key_file).write_text(json.dumps(key))
    with pytest.raises(StoreAccessError, match="no GCP project is set: run 'gcloud auth"):
        GcsStore()


def test_without_credentials_the_store_says_how_to_sign_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "no-gcloud"))
    monkeypatch.setattr("google.auth.compute_engine._metadata._NO_GCE_CHECK", True)  # no metadata server
    with pytest.raises(StoreAccessError, match="no usable GCP credentials .*gcloud auth application-default"):
        GcsStore()


def test_rclone_gets_the_service_account_and_the_endpoint(gcs: FakeGCS) -> None:
    options = GcsStore().rclone_config()
    assert options.pop("service_account_credentials") == Path(gcs.key_file).read_text().strip()
    assert options == {
        "type": "google cloud storage",
        "project_number": PROJECT,
        "bucket_policy_only": "true",
        "endpoint": f"{gcs.url}/storage/v1/",
    }


def test_rclone_refreshes_a_users_token(
    gcs: FakeGCS, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    user = {"type": "authorized_user", "client_id": "c1", "client_secret": "s1", "refresh_token": "r1"}
    (tmp_path / "user.json").write_text(json.dumps(user))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "user.json"))
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", PROJECT)
    options = GcsStore().rclone_config()
    assert (options["client_id"], options["client_secret"]) == ("c1", "s1")
    assert json.loads(options["token"])["refresh_token"] == "r1"


_BAD_REQUESTS = [
    ("POST", "/storage/v1/b?project=skyhop-test", {"json": {"name": "Bad_Name"}}, "Invalid bucket name"),
    ("POST", "/storage/v1/b?project=skyhop-test", {"json": {"name": "goog-x"}}, "Invalid bucket name"),
    ("POST", "/storage/v1/b?project=skyhop-test", {"json": {"name": "10.0.0.1"}}, "Invalid bucket name"),
    ("POST", "/storage/v1/b?project=other", {"json": {"name": "ok-1"}}, "project 'other'"),
    (
        "POST",
        "/storage/v1/b?project=skyhop-test",
        {"json": {"name": "ok-1", "labels": {"Up": "x"}}},
        "label key",
    ),
    ("POST", "/storage/v1/b?project=skyhop-test", {"json": {"name": "ok-1", "labels": {"k": "A"}}}, "label"),
    ("GET", "/storage/v1/b?project=skyhop-test", {"headers": {"Authorization": "Bearer forged"}}, "bearer"),
    ("POST", "/upload/storage/v1/b/data-1/o?uploadType=media", {"data": b"x"}, "uploadType"),
    ("POST", "/upload/storage/v1/b/data-1/o?uploadType=resumable", {"json": {"name": "a\nb"}}, "object name"),
    (
        "POST",
        "/upload/storage/v1/b/data-1/o?uploadType=multipart",
        {"data": b"x", "headers": {"Content-Type": "application/octet-stream"}},
        "Content-Type",
    ),
    (
        "POST",
        "/upload/storage/v1/b/data-1/o?uploadType=multipart",
        {
            "data": b'--b\r\nContent-Type: application/json\r\n\r\n{"name": "x"}\r\n--b--\r\n',
            "headers": {"Content-Type": "multipart/related; boundary=b"},
        },
        "2 parts",
    ),
    ("POST", "/storage/v1/b?project=skyhop-test", {"json": ["ok-1"]}, "not a JSON object"),
]


@pytest.mark.parametrize(("method", "path", "options", "rule"), _BAD_REQUESTS)
def test_the_fake_refuses_what_cloud_storage_refuses(
    gcs: FakeGCS, method: str, path: str, options: dict[str, Any], rule: str
) -> None:
    """Each rule of the fake fails a wrong request, so a store that sent one would fail its test."""
    store = GcsStore()
    store.create("data-1", None, {})
    headers = {"Authorization": f"Bearer {next(iter(gcs.issued))}", **options.pop("headers", {})}
    reply = requests.request(method, f"{gcs.url}{path}", headers=headers, timeout=10, **options)
    assert reply.status_code in (400, 401) and len(gcs.violations) == 1 and rule in gcs.violations[0]
    gcs.violations.clear()


def test_the_fake_checks_resumable_chunks(gcs: FakeGCS) -> None:
    store = GcsStore()
    store.create("data-1", None, {})
    auth = {"Authorization": f"Bearer {next(iter(gcs.issued))}"}
    start = requests.post(
        f"{gcs.url}/upload/storage/v1/b/data-1/o?uploadType=resumable",
        json={"name": "x"},
        headers=auth,
        timeout=10,
    )
    session = start.headers["Location"]
    for claimed, size, rule in [
        ("bytes 0-999/*", 1000, "256 KiB"),
        ("bytes 5-262148/*", 262144, "starts at 5"),
        ("bytes 0-9/*", 5, "chunk length"),
        ("bytes 0-262143/100", 262144, "more bytes than the total"),
        ("0-9", 10, "Content-Range"),
    ]:
        headers = {**auth, "Content-Range": claimed}
        assert requests.put(session, data=b"x" * size, headers=headers, timeout=10).status_code == 400
        assert rule in gcs.violations.pop()
    assert requests.put(f"{session}-gone", data=b"x", headers=auth, timeout=10).status_code == 404
    assert "No such upload session" in gcs.violations.pop()


@needs_rclone
def test_rclone_on_a_node_reads_and_writes_the_bucket(gcs: FakeGCS, tmp_path: Path) -> None:
    """The remote ``rclone_config`` describes is one rclone can use: it lists, reads and writes."""
    check_rclone_round_trip(GcsStore(), tmp_path)
    assert gcs.objects["data-1"]["out/ckpt.pt"] == b"weights"


def test_without_the_sdk_the_store_names_the_extra(tmp_path: Path) -> None:
    code = (
        "from skyhop.spec.storage import StoreKind\n"
        "from skyhop.storage import StorageError, get_store\n"
        "try:\n"
        "    get_store(StoreKind.GCS)\n"
        "except StorageError as exc:\n"
        "    print(type(exc).__name__, exc)\n"
    )
    env = blocked_env(tmp_path / "blocker", {**os.environ, "AZURE_STORAGE_ACCOUNT": "acct1"})
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert (
        done.stdout.strip()
        == "StoreUnavailableError gcs storage needs google-cloud-storage: pip install 'skyhop[gcp]'"
    ), done.stderr
