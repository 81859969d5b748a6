"""What ``show-gpus`` lists: each accelerator, the counts a node can have, and where, at what price.

Prices are those a launch would pay, so an accelerator GCP attaches to a host VM is priced with
the host the optimizer would pick for it, and a whole instance type is priced as a whole.
"""

from __future__ import annotations

from pydantic import BaseModel

from skyhop.optimizer.blocklist import Blocklist
from skyhop.optimizer.launchables import catalog_launchables
from skyhop.providers.base import Offering
from skyhop.providers.catalog import Catalog, CatalogSet, policy_for
from skyhop.spec import Resources

__all__ = ["GpuOffer", "list_gpus", "offering_gpus"]


class GpuOffer(BaseModel):
    """One accelerator count on one instance type, at its cheapest (or in one region with ``--all``)."""

    accelerator: str
    count: float
    provider: str
    instance_type: str
    cpus: float
    memory_gib: float
    accelerator_memory_gib: float | None = None
    region: str | None = None
    """Where the on-demand price is lowest (or the region of this row, with ``all_regions``)."""
    price: float | None = None
    spot_price: float | None = None
    """Cheapest spot price of the same instance type (anywhere, or in this region)."""
    spot_region: str | None = None
    """Where that spot price is: spot markets differ per region, so it may not be ``region``."""


def _asked(accelerator: str, count: float, name: str | None, wanted: float | None) -> bool:
    """Whether ``count`` ``accelerator`` is what ``show-gpus NAME[:COUNT]`` asked for (None: any)."""
    if name and accelerator.upper() != name.upper():
        return False
    return wanted is None or abs(count - wanted) <= 0.01


def _offers(catalog: Catalog, name: str, count: float, region: str | None) -> list[Offering]:
    """Launchable offerings for ``count`` ``name`` on this cloud, on-demand and spot together."""
    policy = policy_for(catalog.provider)
    if policy is None:
        return []
    infra = "/".join(p for p in (catalog.provider, region) if p)
    request = Resources(accelerators={name: count}, infra=infra)
    found = catalog_launchables(request, catalog, policy, Blocklist())
    spot = catalog_launchables(request.model_copy(update={"use_spot": True}), catalog, policy, Blocklist())
    return found + spot


def list_gpus(
    catalogs: CatalogSet,
    *,
    name: str | None = None,
    count: float | None = None,
    cloud: str | None = None,
    region: str | None = None,
    all_regions: bool = False,
) -> list[GpuOffer]:
    """Accelerator offers, by accelerator, count, then price."""
    rows: list[GpuOffer] = []
    for provider in catalogs.names:
        if cloud and provider != cloud:
            continue
        catalog = catalogs.get(provider)
        pairs = {(t.accelerator, t.accelerator_count) for t in catalog.types.values() if t.accelerator}
        pairs |= set(catalog.attachable)
        for acc, n in sorted(p for p in pairs if p[0] is not None):
            if not _asked(acc, n, name, count):
                continue
            rows += _rows(catalog, acc, n, region, all_regions)
    return sorted(
        rows,
        key=lambda r: (r.accelerator, r.count, r.price if r.price is not None else float("inf"), r.provider),
    )


def _rows(catalog: Catalog, acc: str, n: float, region: str | None, all_regions: bool) -> list[GpuOffer]:
    offers = _offers(catalog, acc.upper(), n, region)
    if not offers:
        return []
    groups: dict[str | None, list[Offering]] = {}
    for o in offers:
        groups.setdefault(o.region if all_regions else None, []).append(o)
    rows = []
    for where, group in groups.items():
        priced = [o for o in group if o.price is not None]
        best = min(priced or group, key=lambda o: o.price)
        spots = [o for o in group if o.spot_price is not None and o.instance_type == best.instance_type]
        spot = min(spots, key=lambda o: (o.spot_price or 0.0, o.region or "")) if spots else None
        memory = catalog.types[
            best.instance_type
        ].accelerator_memory_gib or catalog.accelerator_memory_gib.get(acc)
        rows.append(
            GpuOffer(
                accelerator=acc,
                count=n,
                provider=catalog.provider,
                instance_type=best.instance_type,
                cpus=best.cpus,
                memory_gib=best.memory_gib,
                accelerator_memory_gib=memory,
                region=where or best.region,
                price=best.price if priced else None,
                spot_price=spot.spot_price if spot else None,
                spot_region=spot.region if spot else None,
            )
        )
    return rows


def offering_gpus(
    offerings: list[Offering],
    *,
    name: str | None = None,
    count: float | None = None,
    region: str | None = None,
) -> list[GpuOffer]:
    """Accelerators of a provider whose offerings are what is free now, not a catalog (Kubernetes:
    one offering per node shape with free GPUs): one row per accelerator, count and region, on the
    largest host with them, so the list says how many GPUs a task can have on one node right now."""
    best: dict[tuple[str, float, str | None], Offering] = {}
    for o in offerings:
        if region and o.region != region:
            continue
        for acc, n in o.accelerators.items():
            if not _asked(acc, n, name, count):
                continue
            key = (acc, n, o.region)
            if key not in best or (o.cpus, o.memory_gib) > (best[key].cpus, best[key].memory_gib):
                best[key] = o
    rows = [
        GpuOffer(
            accelerator=acc,
            count=n,
            provider=o.provider,
            instance_type=o.instance_type,
            cpus=o.cpus,
            memory_gib=o.memory_gib,
            region=where,
            price=o.price,
        )
        for (acc, n, where), o in best.items()
    ]
    return sorted(rows, key=lambda r: (r.accelerator, r.count, r.region or ""))
