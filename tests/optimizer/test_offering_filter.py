"""Ready-made offerings (local, ssh, sim) against a request: the request is read once, not per offering."""

from __future__ import annotations

import pytest

import skyhop.spec.resources as resources_module
from skyhop.optimizer.launchables import offering_filter
from skyhop.providers.base import Offering
from skyhop.spec import Resources


def _offering(zone: str, cpus: int, spot_price: float | None) -> Offering:
    return Offering(
        provider="sim",
        instance_type=f"m{cpus}",
        cpus=cpus,
        memory_gib=4 * cpus,
        region=zone[:-1],
        zone=zone,
        price=1.0,
        spot_price=spot_price,
    )


def test_the_filter_keeps_what_the_request_admits() -> None:
    fits = offering_filter(Resources(infra="sim/us-east-1", cpus="4+", use_spot=True))
    assert fits(_offering("us-east-1a", 8, 0.3))
    assert not fits(_offering("us-east-1a", 2, 0.3))  # too few vCPUs
    assert not fits(_offering("us-east-2a", 8, 0.3))  # another region
    assert not fits(_offering("us-east-1a", 8, None))  # no spot market there


def test_the_request_is_parsed_once_for_thousands_of_offerings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each relaunch of a managed job optimizes over a sim copy of a cloud's catalog: parsing the
    request's infra per offering made the optimizer a large share of a busy worker's time."""
    request = Resources(infra="sim/us-east-1", cpus="4+", use_spot=True)
    calls = 0
    split = resources_module._split_infra

    def counted(infra: str) -> list[str]:
        nonlocal calls
        calls += 1
        return split(infra)

    monkeypatch.setattr(resources_module, "_split_infra", counted)
    fits = offering_filter(request)
    offerings = [_offering("us-east-1a", 4 + i % 8, 0.3) for i in range(2_000)]
    assert sum(map(fits, offerings)) == 2_000
    assert calls <= 3  # cloud, region and zone, read once each
