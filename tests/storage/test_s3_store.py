"""The S3 store's contract on moto, and R2 and MinIO as S3 at their configured endpoints."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from skyhop.providers.home import skyhop_home
from skyhop.spec.storage import BucketRef, StoreKind, bucket_url_of
from skyhop.storage import BucketNameTakenError, StoreUnavailableError, ownership_labels
from skyhop.storage.s3 import MinioStore, R2Store, S3Store
from tests.conftest import skyhop


def test_every_call_is_idempotent(s3: Any, tmp_path: Path) -> None:
    store = S3Store()
    labels = ownership_labels("c1", persistent=False)
    store.create("bkt-idem", None, labels)
    store.create("bkt-idem", None, {"other": "x"})  # a retry: the first labels stay
    assert store.labels("bkt-idem") == labels
    (tmp_path / "f.txt").write_text("one")
    store.upload(tmp_path / "f.txt", "bkt-idem", "p")
    store.upload(tmp_path / "f.txt", "bkt-idem", "p")
    assert [o["Key"] for o in s3.list_objects_v2(Bucket="bkt-idem")["Contents"]] == ["p/f.txt"]
    assert [r.name for r in store.list({"skyhop_cluster": "c1"})] == ["bkt-idem"]
    assert store.list({"skyhop_cluster": "c2"}) == []
    assert store.delete("bkt-idem") is True
    assert store.delete("bkt-idem") is False
    assert store.labels("bkt-idem") is None and not store.exists("bkt-idem")


def test_a_name_another_account_owns_is_one_clear_error(s3: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from botocore.exceptions import ClientError

    store = S3Store()
    taken = ClientError({"Error": {"Code": "BucketAlreadyExists", "Message": "taken"}}, "CreateBucket")
    monkeypatch.setattr(store._client, "create_bucket", lambda **_: (_ for _ in ()).throw(taken))
    with pytest.raises(BucketNameTakenError, match="taken by another account; choose another name"):
        store.create("bkt-taken", None, {})


def test_r2_is_s3_at_its_endpoint(moto: str, s3: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    config = skyhop_home() / "config.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    monkeypatch.delenv("SKYHOP_R2_ENDPOINT", raising=False)
    config.unlink(missing_ok=True)
    with pytest.raises(StoreUnavailableError, match="r2.account_id"):
        R2Store()
    config.write_text(f"r2:\n  endpoint: {moto}\n")
    try:
        store = R2Store()
        store.create("bkt-r2", None, ownership_labels("c1", persistent=True))
        assert "bkt-r2" in {b["Name"] for b in s3.list_buckets()["Buckets"]}
        rclone = store.rclone_config()
        assert rclone["provider"] == "Cloudflare" and rclone["endpoint"] == moto
        assert "force_path_style" not in rclone
    finally:
        config.unlink()


def test_minio_is_s3_at_its_server(moto: str, s3: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """``minio://bucket`` (SkyPilot's MinIO examples): S3's API at the server in ``minio.endpoint``,
    path-style, as a self-hosted server is addressed (moto stands in for the MinIO server)."""
    config = skyhop_home() / "config.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    monkeypatch.delenv("SKYHOP_MINIO_ENDPOINT", raising=False)
    config.unlink(missing_ok=True)
    with pytest.raises(StoreUnavailableError, match=r"minio needs its endpoint: set minio.endpoint"):
        MinioStore()
    monkeypatch.setenv("SKYHOP_MINIO_ENDPOINT", moto)
    store = MinioStore()
    store.create("bkt-minio", None, ownership_labels("c1", persistent=True))
    assert "bkt-minio" in {b["Name"] for b in s3.list_buckets()["Buckets"]}
    rclone = store.rclone_config()
    assert (rclone["provider"], rclone["endpoint"], rclone["force_path_style"]) == ("Minio", moto, "true")
    assert bucket_url_of("minio://bkt-minio/data") == BucketRef(
        store=StoreKind.MINIO, bucket="bkt-minio", prefix="data"
    )


def test_storage_commands_without_credentials_are_one_line(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "SKYHOP_R2_ENDPOINT"):
        env.pop(name, None)
    deleted = skyhop("storage", "delete", "-y", "some-bucket", env=env)
    assert deleted.returncode == 1 and "Traceback" not in deleted.stderr
    assert deleted.stderr.splitlines() == [
        "some-bucket: no s3 credentials: run 'aws configure', or set AWS_ACCESS_KEY_ID and "
        "AWS_SECRET_ACCESS_KEY"
    ]
    listed = skyhop("storage", "ls", "--json", env=env)
    assert listed.returncode == 0 and "Traceback" not in listed.stderr
