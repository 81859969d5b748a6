"""Catalog files: both layouts, precedence, the parsed cache, and errors that name the file and line."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from skyhop.providers.catalog import CLOUDS, CatalogError, load_catalogs
from skyhop.providers.catalog.skyhop_csv import COLUMNS, read_skyhop_csv
from skyhop.providers.catalog.skypilot_v8 import read_skypilot_v8
from skyhop.providers.catalog.sources import user_catalog_path

V8_GCP = """\
InstanceType,vCPUs,MemoryGiB,AcceleratorName,AcceleratorCount,GpuInfo,Region,AvailabilityZone,Price,SpotPrice
a2-highgpu-1g,12.0,85.0,,,,us-central1,us-central1-a,0.9,0.3
a2-highgpu-1g,12.0,85.0,,,,us-central1,us-central1-b,0.9,0.3
n1-highmem-8,8.0,52.0,,,,us-central1,us-central1-a,0.47,0.1
,,,A100,1,"{'Gpus': [{'MemoryInfo': {'SizeInMiB': 40960}}]}",us-central1,us-central1-a,2.9,1.4
,,,T4,1,"{'Gpus': [{'MemoryInfo': {'SizeInMiB': 16384}}]}",us-central1,us-central1-a,0.35,0.11
,,,tpu-v2-8,1,,us-central1,us-central1-b,4.5,1.35
,,,tpu-v4-32,1,,us-central2,us-central2-b,51.52,14.744
"""


def test_v8_gcp_folds_built_in_gpus_into_their_machine_and_keeps_n1_gpus_attachable(tmp_path: Path) -> None:
    path = tmp_path / "vms.csv"
    path.write_text(V8_GCP)
    catalog = read_skypilot_v8("gcp", path)
    a2 = catalog.types["a2-highgpu-1g"]
    assert (a2.accelerator, a2.accelerator_count, a2.accelerator_memory_gib) == ("A100", 1.0, 40.0)
    # Only zone a has both the VM and its GPU.
    assert catalog.locations["a2-highgpu-1g"] == [("us-central1", "us-central1-a", 3.8, 1.7)]
    assert set(catalog.attachable) == {("T4", 1.0)}  # A100 is never attached; a TPU is a VM of its own
    tpu = catalog.types["tpu-v2-8"]
    assert (tpu.cpus, tpu.memory_gib, tpu.accelerator, tpu.accelerator_count) == (96, 334, "tpu-v2-8", 1.0)
    assert catalog.locations["tpu-v2-8"] == [("us-central1", "us-central1-b", 4.5, 1.35)]
    assert "tpu-v4-32" not in catalog.types  # a multi-host slice is not launched


def _write(tmp_path: Path, body: str, header: str = ",".join(COLUMNS)) -> Path:
    path = tmp_path / "catalog.csv"
    path.write_text(header + "\n" + body)
    return path


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            "m6i.large,2,8,,,,us-east-1,,0.096,\nm6i.xlarge,4,lots,,,,us-east-1,,0.192,\n",
            ":3: column memory_gib must be a number",
        ),
        ("m6i.large,2,8,,,,,,0.096,\n", ":2: column region is empty"),
        ("m6i.large,2,8,,,,us-east-1,,,\n", ":2: row has neither price nor spot_price"),
        (
            "p5.48xlarge,192,2048,H100,,80,us-east-1,,98,\n",
            ":2: accelerator H100 needs a positive accelerator_count",
        ),
        ("m6i.large,2,8,,,,us-east-1,,-1,\n", ":2: column price must not be negative"),
        (
            "m6i.large,2,8,,,,us-east-1,,0.1,\nm6i.large,4,8,,,,eu-west-1,,0.1,\n",
            ":3: m6i.large has a different size",
        ),
    ],
)
def test_a_bad_row_is_reported_with_file_and_line(tmp_path: Path, body: str, message: str) -> None:
    path = _write(tmp_path, body)
    with pytest.raises(CatalogError) as info:
        read_skyhop_csv("aws", path)
    assert f"catalog {path}{message}" in str(info.value)


def test_a_stale_layout_says_so_and_how_to_fix_it(tmp_path: Path) -> None:
    path = _write(
        tmp_path, "m6i.large,2,8,us-east-1,0.096\n", header="InstanceType,vCPUs,MemoryGiB,Region,Price"
    )
    with pytest.raises(
        CatalogError, match=r":1: stale or unknown layout: missing column\(s\) instance_type.*catalog update"
    ):
        read_skyhop_csv("aws", path)
    with pytest.raises(CatalogError, match=r"missing.csv: cannot read it"):
        read_skyhop_csv("aws", tmp_path / "missing.csv")


def test_shipped_catalogs_read_cleanly_and_cover_the_ai_families() -> None:
    catalogs = load_catalogs()
    assert catalogs.names == list(CLOUDS) and not catalogs.restricted
    names = {c: set(catalogs.get(c).types) for c in CLOUDS}
    for family in ("p3.", "p4d.", "p5.", "g4dn.", "g5.", "g6.", "trn1.", "m6i.", "c6i.", "r6i."):
        assert any(n.startswith(family) for n in names["aws"]), family
    for family in ("a2-", "a3-", "g2-", "n2-", "e2-", "n1-"):
        assert any(n.startswith(family) for n in names["gcp"]), family
    assert {a for a, _ in catalogs.get("gcp").attachable} >= {"T4", "V100"}
    for family in ("Standard_NC", "Standard_ND", "Standard_NV", "Standard_D", "Standard_E", "Standard_F"):
        assert any(n.startswith(family) for n in names["azure"]), family


def test_a_regenerated_catalog_overrides_the_shipped_one(tmp_path: Path) -> None:
    path = user_catalog_path("azure")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(",".join(COLUMNS) + "\nStandard_D2s_v5,2,8,,,,eastus,,0.01,\n")
    try:
        assert set(load_catalogs().get("azure").types) == {"Standard_D2s_v5"}
    finally:
        path.unlink()


def test_a_catalog_folder_limits_the_clouds_and_accepts_both_layouts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "gcp").mkdir()
    (tmp_path / "gcp" / "vms.csv").write_text(V8_GCP)
    (tmp_path / "aws").mkdir()
    (tmp_path / "aws" / "catalog.csv").write_text(
        ",".join(COLUMNS) + "\nm6i.large,2,8,,,,us-east-1,,0.096,\n"
    )
    monkeypatch.setenv("SKYHOP_CATALOG_DIR", str(tmp_path))
    catalogs = load_catalogs()
    assert (catalogs.names, catalogs.restricted) == (["aws", "gcp"], True)
    assert "a2-highgpu-1g" in catalogs.get("gcp").types
    monkeypatch.setenv("SKYHOP_CATALOG_DIR", str(tmp_path / "nope"))
    with pytest.raises(CatalogError, match="is not a folder"):
        load_catalogs()


def test_the_parsed_cache_follows_edits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "aws").mkdir()
    path = tmp_path / "aws" / "catalog.csv"
    path.write_text(",".join(COLUMNS) + "\nm6i.large,2,8,,,,us-east-1,,0.096,\n")
    monkeypatch.setenv("SKYHOP_CATALOG_DIR", str(tmp_path))
    assert load_catalogs().get("aws").min_price["m6i.large"] == 0.096
    path.write_text(",".join(COLUMNS) + "\nm6i.large,2,8,,,,us-east-1,,0.5,\n")
    os.utime(path, ns=(1, 1))
    assert load_catalogs().get("aws").min_price["m6i.large"] == 0.5
