"""What ``skyhop check`` decided and the catalogs ``skyhop catalog update`` fetched reach every worker.

Two machines are two homes with nothing in common but the store (a bucket on moto's S3): the CLI's
home runs the real ``skyhop check``; the worker's home is this process, which reads verdicts and
catalogs as the optimize activity does.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from unittest import mock

import boto3
import pytest

from skyhop.providers.catalog.skyhop_csv import COLUMNS
from skyhop.providers.catalog.sources import load_catalogs, user_catalog_path
from skyhop.providers.catalog.update import update_catalog
from skyhop.providers.registry import provider_names, read_checks
from skyhop.storage.content import FolderContentStore, S3ContentStore
from tests.conftest import skyhop
from tests.providers.aws_support import MotoFaults


@pytest.fixture
def bucket(faults: MotoFaults, monkeypatch: pytest.MonkeyPatch) -> str:
    """An empty deployment bucket on moto, the store of every home in the test."""
    boto3.session.Session().client("s3", region_name="us-east-1").create_bucket(Bucket="deploy")
    url = "s3://deploy/skyhop"
    monkeypatch.setenv("SKYHOP_STORE_URL", url)
    return url


def _eventually(condition: Callable[[], bool], deadline_s: float = 60) -> None:
    end = time.monotonic() + deadline_s
    while not condition():
        assert time.monotonic() < end, "not seen before the deadline"
        time.sleep(0.2)


def test_a_worker_elsewhere_follows_the_clis_check(
    bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cli_home = tmp_path / "laptop"
    env = {**os.environ, "SKYHOP_HOME": str(cli_home)}
    done = skyhop("check", "--json", env=env)
    assert done.returncode == 0, done.stderr
    monkeypatch.setenv("SKYHOP_HOME", str(tmp_path / "worker"))
    checks = read_checks()
    assert checks["aws"].enabled and not checks["sim"].enabled
    assert "aws" in provider_names() and "sim" not in provider_names()

    (cli_home / "sim").mkdir()
    (cli_home / "sim" / "plan.yaml").write_text("faults: []\n")  # the sim is set up on the laptop
    done = skyhop("check", env=env)
    assert done.returncode == 0, done.stderr
    assert f"Recorded in {bucket}/state/enabled_providers.json" in done.stderr + done.stdout
    _eventually(lambda: "sim" in provider_names())


def test_reading_the_verdicts_again_asks_the_store_at_most_once_per_revalidation(
    bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An optimize reads the verdicts several times: a bucket is asked once per few seconds, and
    only a changed copy is downloaded."""
    done = skyhop("check", env={**os.environ, "SKYHOP_HOME": str(tmp_path / "laptop")})
    assert done.returncode == 0, done.stderr
    monkeypatch.setenv("SKYHOP_HOME", str(tmp_path / "worker"))
    asked = []
    original = S3ContentStore.get_if_changed

    def counted(store: S3ContentStore, key: str, seen: str | None) -> tuple[str, bytes | None]:
        asked.append(key)
        return original(store, key, seen)

    monkeypatch.setattr(S3ContentStore, "get_if_changed", counted)
    started = time.monotonic()
    for _ in range(20):
        assert read_checks()["aws"].enabled
    if time.monotonic() - started < S3ContentStore.revalidate_s:  # else too busy a machine to tell
        assert asked == ["state/enabled_providers.json"]
    monkeypatch.setattr(S3ContentStore, "get_if_changed", original)
    store = S3ContentStore("deploy", "skyhop", None)
    tag, data = store.get_if_changed("state/enabled_providers.json", None)
    assert data is not None and store.get_if_changed("state/enabled_providers.json", tag) == (tag, None)


def test_a_folder_store_sees_a_rewrite_at_once(tmp_path: Path) -> None:
    store = FolderContentStore(tmp_path)
    store.put_bytes("state/x", b"one")
    tag, data = store.get_if_changed("state/x", None)
    assert data == b"one" and store.get_if_changed("state/x", tag) == (tag, None)
    store.put_bytes("state/x", b"two")
    assert store.get_if_changed("state/x", tag)[1] == b"two"


def test_a_catalog_updated_from_one_home_is_the_one_another_home_optimizes_with(
    bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shipped = set(load_catalogs().get("azure").types)
    monkeypatch.setenv("SKYHOP_HOME", str(tmp_path / "laptop"))
    row = ("Standard_D2s_v5", 2.0, 8.0, "", None, None, "eastus", "", 0.01, None)
    with mock.patch("skyhop.providers.azure.pricing.fetch_rows", return_value=[row]):
        update_catalog("azure")
    monkeypatch.setenv("SKYHOP_HOME", str(tmp_path / "worker"))
    assert not user_catalog_path("azure").exists()
    catalog = load_catalogs().get("azure")
    assert set(catalog.types) == {"Standard_D2s_v5"} != shipped
    assert user_catalog_path("azure").read_text().splitlines()[0] == ",".join(COLUMNS)
