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


def test_a_divisible_offering_takes_any_request_it_has_room_for() -> None:
    """A Kubernetes node with 8 free H100s and 96 vCPUs runs a pod of 1 H100 and 1 vCPU: its
    offering is room, not a shape to match exactly (the pod asks for what the task asked)."""
    node = Offering(
        provider="kubernetes",
        instance_type="96CPU--768GB--H100:8",
        cpus=96,
        memory_gib=768,
        accelerators={"H100": 8},
        region="ctx",
        price=0.0,
        divisible=True,
    )
    assert offering_filter(Resources(cpus=1, accelerators="H100:1"))(node)
    assert offering_filter(Resources(cpus="8+", memory="x4", accelerators="H100:8"))(node)
    assert not offering_filter(Resources(accelerators="H100:16"))(node)
    assert not offering_filter(Resources(accelerators="A100:1"))(node)
    assert not offering_filter(Resources(cpus=128))(node)
    assert not offering_filter(Resources(cpus=64, memory=800))(node)
    # The same numbers as a fixed shape (a VM type) match exactly.
    fixed = node.model_copy(update={"divisible": False})
    assert not offering_filter(Resources(cpus=1, accelerators="H100:1"))(fixed)
    assert offering_filter(Resources(cpus=96, accelerators="H100:8"))(fixed)
