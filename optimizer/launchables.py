"""One request x one cloud -> the launchable offerings, by SkyPilot's rules.

1. Instance types that satisfy the request: the named ``instance_type``; else those with the
   requested accelerators built in, or a host VM for accelerators the cloud attaches (GCP N1);
   else the cloud's default families with the default size (see ``providers.catalog.policy``).
2. They are ranked by their cheapest on-demand price in the allowed locations (spot price instead,
   for spot accelerator requests on AWS/Azure): a type that is only cheap on spot, often a GPU
   type, is not picked for a CPU-only request. Ties go to the name, so the ranking is stable.
3. The first type with an unblocked location wins, and is offered in every location: per zone on
   GCP and for spot (where prices differ per zone), per region otherwise.

Only one type per cloud competes, as in SkyPilot: the cloud's best type, in its best place.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from skyhop.optimizer.blocklist import Blocklist
from skyhop.providers.base import Offering
from skyhop.providers.catalog import Catalog, CatalogPolicy, InstanceType, Location
from skyhop.spec import Quantity, Resources, parse_memory, parse_quantity

__all__ = ["catalog_launchables", "offering_filter"]

_Choice = tuple[InstanceType, tuple[str, float] | None]
"""An instance type, and the (accelerator, count) attached to it when billed separately."""


def offering_filter(resources: Resources) -> Callable[[Offering], bool]:
    """Whether a ready-made offering (a catalog-less provider such as ``local``) satisfies a request:
    it is what was asked for, or, for a divisible one (a Kubernetes node's free room), has room for it.

    The request is read once, not per offering: the optimizer tests every ready-made offering
    (thousands, for a sim that copies a cloud's catalog), and each read parses its strings again.
    """
    cloud, region, zone = resources.cloud, resources.region, resources.zone
    instance_type, use_spot = resources.instance_type, resources.use_spot
    cpus, memory = resources.cpu_quantity, resources.memory_quantity
    wanted = resources.node_accelerators or {}

    def fits(offering: Offering) -> bool:
        if cloud and cloud != offering.provider:
            return False
        if region and region != offering.region:
            return False
        if zone and zone != offering.zone:
            return False
        if instance_type and instance_type != offering.instance_type:
            return False
        if offering.divisible:
            if not _room_for(offering):
                return False
        elif not _is(offering):
            return False
        return (offering.spot_price if use_spot else offering.price) is not None

    def _is(offering: Offering) -> bool:
        if cpus and not cpus.admits(offering.cpus):
            return False
        if memory and not memory.admits(offering.memory_gib, offering.cpus):
            return False
        offered = {name.upper(): count for name, count in offering.accelerators.items()}
        return not any(abs(offered.get(name, 0.0) - count) > 0.01 for name, count in wanted.items())

    def _room_for(offering: Offering) -> bool:
        asked_cpus = cpus.value if cpus else 1.0
        if cpus and not cpus.fits_within(offering.cpus, asked_cpus):
            return False
        if memory and not memory.fits_within(offering.memory_gib, asked_cpus):
            return False
        offered = {name.upper(): count for name, count in offering.accelerators.items()}
        return all(offered.get(name, 0.0) + 0.01 >= count for name, count in wanted.items())

    return fits


def catalog_launchables(
    resources: Resources, catalog: Catalog, policy: CatalogPolicy, blocklist: Blocklist
) -> list[Offering]:
    """The launchable offerings of ``catalog``'s best instance type for ``resources``, unsorted."""
    if resources.cloud and resources.cloud != catalog.provider:
        return []
    allowed = _location_filter(resources)
    choices = _choices(resources, catalog, policy)
    by_spot = resources.use_spot and policy.rank_accelerator_types_by_spot and bool(resources.accelerators)
    ranked = sorted(
        (
            (price, itype.name, itype, attached)
            for itype, attached in choices
            if (price := _rank_price(catalog, itype, allowed, by_spot)) is not None
        ),
        key=lambda entry: (entry[0], entry[1]),
    )
    for _, _, itype, attached in ranked:
        offerings = [
            o
            for o in _expand(catalog, policy, itype, attached, allowed, resources.use_spot)
            if not blocklist.blocks(o)
        ]
        if offerings:
            return offerings
    return []


def _location_filter(resources: Resources) -> tuple[str | None, str | None]:
    region, zone = resources.region, resources.zone
    return (region.lower() if region else None, zone.lower() if zone else None)


def _allowed(location: Location, allowed: tuple[str | None, str | None]) -> bool:
    region, zone = allowed
    if region is not None and location[0].lower() != region:
        return False
    return zone is None or (location[1] or "").lower() == zone


def _price_at(location: Location, spot: bool) -> float | None:
    return location[3] if spot else location[2]


def _rank_price(
    catalog: Catalog, itype: InstanceType, allowed: tuple[str | None, str | None], by_spot: bool
) -> float | None:
    if allowed == (None, None) and not by_spot:
        return catalog.min_price.get(itype.name)
    prices = [
        p
        for loc in catalog.locations[itype.name]
        if (p := _price_at(loc, by_spot)) is not None and _allowed(loc, allowed)
    ]
    return min(prices) if prices else None


def _choices(resources: Resources, catalog: Catalog, policy: CatalogPolicy) -> list[_Choice]:
    """Instance types (with any attached accelerators) that satisfy the request."""
    cpus, memory = resources.cpu_quantity, resources.memory_quantity
    wanted = next(iter((resources.node_accelerators or {}).items()), None)
    if resources.instance_type is not None:
        itype = catalog.types.get(resources.instance_type)
        if itype is None or not _size_fits(itype, cpus, memory):
            return []
        if wanted is None or _has_builtin(itype, wanted):
            return [(itype, None)]
        attached = _attachable_key(catalog, wanted)
        host_ok = policy.host is not None and itype.name.startswith(policy.host.host_prefixes)
        return [(itype, attached)] if attached and host_ok and not itype.accelerator else []
    if wanted is not None:
        builtin = [
            (t, None)
            for t in catalog.types.values()
            if _has_builtin(t, wanted) and _size_fits(t, cpus, memory)
        ]
        return builtin + _host_choices(catalog, policy, wanted, cpus, memory)
    if cpus is None and memory is None:
        cpus = parse_quantity(f"{policy.default_cpus:g}+", "cpus")
    if memory is None:
        memory = parse_memory(f"x{policy.default_memory_per_cpu:g}")
    return [
        (t, None)
        for t in catalog.types.values()
        if policy.default_family.match(t.name) and not t.accelerator and _size_fits(t, cpus, memory)
    ]


def _host_choices(
    catalog: Catalog,
    policy: CatalogPolicy,
    wanted: tuple[str, float],
    cpus: Quantity | None,
    memory: Quantity | None,
) -> list[_Choice]:
    """Host VMs for accelerators the cloud bills separately, sized as SkyPilot sizes them."""
    attached = _attachable_key(catalog, wanted)
    rule = policy.host
    if attached is None or rule is None:
        return []
    if cpus is None and memory is None:
        default = rule.host_cpus(attached[0], attached[1])
        if default is None:
            return []
        cpus = parse_quantity(f"{default}+", "cpus")
    if memory is None and cpus is not None:
        memory = parse_quantity(f"{cpus.value * rule.memory_per_cpu:g}+", "memory")
    limit = rule.limit(attached[0], attached[1])
    return [
        (t, attached)
        for t in catalog.types.values()
        if t.name.startswith(rule.host_prefixes)
        and not t.accelerator
        and _size_fits(t, cpus, memory)
        and (limit is None or (t.cpus <= limit[0] and t.memory_gib <= limit[1]))
    ]


def _attachable_key(catalog: Catalog, wanted: tuple[str, float]) -> tuple[str, float] | None:
    name, count = wanted
    for key in catalog.attachable:
        if key[0].upper() == name and abs(key[1] - count) <= 0.01:
            return key
    return None


def _has_builtin(itype: InstanceType, wanted: tuple[str, float]) -> bool:
    return (
        itype.accelerator is not None
        and itype.accelerator.upper() == wanted[0]
        and abs(itype.accelerator_count - wanted[1]) <= 0.01
    )


def _size_fits(itype: InstanceType, cpus: Quantity | None, memory: Quantity | None) -> bool:
    if cpus is not None and not cpus.admits(itype.cpus):
        return False
    return memory is None or memory.admits(itype.memory_gib, itype.cpus)


def _expand(
    catalog: Catalog,
    policy: CatalogPolicy,
    itype: InstanceType,
    attached: tuple[str, float] | None,
    allowed: tuple[str | None, str | None],
    use_spot: bool,
) -> Iterable[Offering]:
    """``itype`` in each allowed location with a price for the wanted market."""
    locations = [loc for loc in catalog.locations[itype.name] if _allowed(loc, allowed)]
    accelerators = {itype.accelerator: itype.accelerator_count} if itype.accelerator else {}
    if attached is not None:
        extra = {(loc[0], loc[1]): loc for loc in catalog.attachable[attached]}
        locations = [_plus(loc, extra[(loc[0], loc[1])]) for loc in locations if (loc[0], loc[1]) in extra]
        accelerators = {attached[0]: attached[1]}
    locations = [loc for loc in locations if _price_at(loc, use_spot) is not None]
    per_zone = policy.zoned_on_demand or use_spot
    if not per_zone:
        best: dict[str, Location] = {}
        for loc in locations:
            held = best.get(loc[0])
            if held is None or (_price_at(loc, use_spot) or 0.0) < (_price_at(held, use_spot) or 0.0):
                best[loc[0]] = loc
        locations = [(region, None, loc[2], loc[3]) for region, loc in best.items()]
    for region, zone, price, spot in locations:
        yield Offering(
            provider=catalog.provider,
            instance_type=itype.name,
            cpus=itype.cpus,
            memory_gib=itype.memory_gib,
            accelerators=accelerators,
            region=region,
            zone=zone,
            # Offering.price is required: a spot-only row reports its spot price for both.
            price=price if price is not None else spot or 0.0,
            spot_price=spot,
        )


def _plus(vm: Location, gpu: Location) -> Location:
    price = None if vm[2] is None or gpu[2] is None else round(vm[2] + gpu[2], 6)
    spot = None if vm[3] is None or gpu[3] is None else round(vm[3] + gpu[3], 6)
    return (vm[0], vm[1], price, spot)
