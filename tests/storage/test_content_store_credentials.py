"""The content store's own S3 keys (SKYHOP_STORE_ACCESS_KEY_ID and _SECRET_ACCESS_KEY), on a strict moto.

A deployment's store (MinIO in docker-compose.yml) has keys of its own while the same worker
provisions on AWS with boto3's chain: the store must use its keys, and boto3's chain must not see them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
import requests

from skyhop.storage.claim_check import fetch, pack
from skyhop.storage.content import load_store_config
from skyhop.storage.errors import StoreAccessError
from tests.providers.aws_support import reset

_ALLOW_ALL = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}


@pytest.fixture
def checked_keys(moto: str, s3: Any) -> Iterator[dict[str, str]]:
    """A bucket and an IAM user's keys; from then on moto refuses any other key (boto3's chain's too)."""
    s3.create_bucket(Bucket="skyhop-store")
    iam = boto3.session.Session().client("iam", region_name="us-east-1")
    iam.create_user(UserName="skyhop-store")
    iam.put_user_policy(UserName="skyhop-store", PolicyName="all", PolicyDocument=json.dumps(_ALLOW_ALL))
    key = iam.create_access_key(UserName="skyhop-store")["AccessKey"]
    requests.post(f"{moto}/moto-api/reset-auth", data=b"0", timeout=10).raise_for_status()
    try:
        yield {
            "SKYHOP_STORE_ACCESS_KEY_ID": key["AccessKeyId"],
            "SKYHOP_STORE_SECRET_ACCESS_KEY": key["SecretAccessKey"],
        }
    finally:
        requests.post(f"{moto}/moto-api/reset-auth", data=b"inf", timeout=10).raise_for_status()
        reset(moto)


def test_the_store_uses_its_own_keys_and_boto3s_chain_never_sees_them(
    moto: str, checked_keys: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SKYHOP_STORE_URL", "s3://skyhop-store/deploy")
    monkeypatch.setenv("SKYHOP_STORE_ENDPOINT_URL", moto)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("print('hi')\n")

    # boto3's chain (the aws provider's keys, here moto's "testing") is refused by this store...
    with pytest.raises(StoreAccessError, match="S3 refused access to s3://skyhop-store/deploy"):
        asyncio.run(pack(tmp_path / "src", load_store_config().open()))
    # ...and the store's own keys work, for the CLI's upload and the worker's fetch alike.
    for name, value in checked_keys.items():
        monkeypatch.setenv(name, value)
    config = load_store_config()
    assert checked_keys["SKYHOP_STORE_SECRET_ACCESS_KEY"] not in repr(config)
    ref, report = asyncio.run(pack(tmp_path / "src", config.open()))
    assert report.uploaded == 1
    tree = fetch(ref, tmp_path / "cache", config)
    assert (tree / "train.py").read_text() == "print('hi')\n"
    assert boto3.session.Session().get_credentials().access_key == "testing"  # type: ignore[union-attr]


def test_one_key_without_the_other_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYHOP_STORE_ACCESS_KEY_ID", "AKIA-only")
    monkeypatch.delenv("SKYHOP_STORE_SECRET_ACCESS_KEY", raising=False)
    with pytest.raises(StoreAccessError, match="set both SKYHOP_STORE_ACCESS_KEY_ID and SKYHOP_STORE_SECRET"):
        load_store_config()
