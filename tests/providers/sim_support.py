"""Setting up the sim cloud for a test: a catalog of many zones, a fault plan, and enabling it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from skyhop.providers.base import CheckResult
from skyhop.providers.catalog.skyhop_csv import COLUMNS
from skyhop.providers.registry import read_checks, write_checks
from skyhop.providers.sim import SimCloud, sim_root

__all__ = ["ZONES", "enabled_sim", "sim_zone_location", "write_catalog", "write_plan"]

_REGIONS = {
    "us-east-1": "abcdef",
    "us-east-2": "abc",
    "us-west-2": "abcd",
    "eu-west-1": "abc",
    "eu-central-1": "abc",
    "ap-south-1": "abc",
    "ap-northeast-1": "acd",
}
ZONES = [(region, region + letter) for region, letters in _REGIONS.items() for letter in letters]
"""(region, zone) of every zone in the test catalog, cheapest first."""


def write_catalog(path: Path, zones: list[tuple[str, str]] = ZONES) -> Path:
    """One small instance type in every zone, each zone a little dearer than the one before."""
    header = ",".join(COLUMNS)
    rows = [
        f"m6i.large,2,8,,,,{region},{zone},{0.096 + i * 0.001:.3f},{0.03 + i * 0.001:.3f}"
        for i, (region, zone) in enumerate(zones)
    ]
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


def write_plan(
    catalog: Path, faults: list[dict[str, Any]], latency_s: float = 0.0, bridge: str | None = None
) -> SimCloud:
    """Replace the sim cloud's plan (its attempt counters restart with it); with ``bridge``, each
    node gets a network namespace and an address of its own on it."""
    cloud = SimCloud()
    cloud.root.mkdir(parents=True, exist_ok=True)
    plan: dict[str, Any] = {"catalog": str(catalog), "latency_s": latency_s, "faults": faults}
    if bridge is not None:
        plan["network"] = {"bridge": bridge}
    cloud.plan_path.write_text(yaml.safe_dump(plan))
    return cloud


def sim_zone_location(index: int) -> str:
    """``sim/<region>/<zone>`` of the test catalog's ``index``-th cheapest zone."""
    region, zone = ZONES[index]
    return f"sim/{region}/{zone}"


@contextlib.contextmanager
def enabled_sim(tmp_path: Path) -> Iterator[Path]:
    """The sim enabled as ``skyhop check`` would, with the test catalog; disabled and emptied after.

    Other tests share the session's home, so the sim must not stay a candidate once this test ends.
    """
    catalog = write_catalog(tmp_path / "sim_catalog.csv")
    write_plan(catalog, [])
    before = read_checks()
    write_checks({**before, "sim": CheckResult(enabled=True, reason="test")})
    try:
        yield catalog
    finally:
        cloud = SimCloud()
        with contextlib.suppress(Exception):
            cloud.terminate([i["instance_id"] for i in cloud.describe()])
        (sim_root() / "plan.yaml").unlink(missing_ok=True)
        write_checks(before)
