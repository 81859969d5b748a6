"""Choosing where a task runs: filter the offerings by its resources, then take the cheapest."""

from __future__ import annotations

from pydantic import BaseModel

from optimizer.errors import NoFeasibleOfferingError
from providers.base import Offering
from spec import Resources, Task

__all__ = ["Plan", "feasible", "optimize"]


class Plan(BaseModel):
    """The chosen offering and the others that fit, cheapest first."""

    chosen: Offering
    candidates: list[Offering]
    hourly_cost: float
    """Estimated $/hour for all nodes of the task."""


def _price(offering: Offering, use_spot: bool) -> float | None:
    return offering.spot_price if use_spot else offering.price


def feasible(resources: Resources, offering: Offering) -> bool:
    """Whether ``offering`` satisfies ``resources`` (location, type, size, accelerators, spot)."""
    if resources.cloud and resources.cloud != offering.provider:
        return False
    if resources.region and resources.region != offering.region:
        return False
    if resources.zone and resources.zone != offering.zone:
        return False
    if resources.instance_type and resources.instance_type != offering.instance_type:
        return False
    cpus, memory = resources.cpu_quantity, resources.memory_quantity
    if cpus and not cpus.admits(offering.cpus):
        return False
    if memory and not memory.admits(offering.memory_gib, offering.cpus):
        return False
    wanted = resources.accelerators or {}
    offered = {name.upper(): count for name, count in offering.accelerators.items()}
    if any(abs(offered.get(name, 0.0) - count) > 0.01 for name, count in wanted.items()):
        return False
    return _price(offering, resources.use_spot) is not None


def optimize(task: Task, offerings: list[Offering]) -> Plan:
    """The cheapest feasible offering; ties break by provider, region, zone, instance type."""
    resources = task.resources
    fits = [o for o in offerings if feasible(resources, o)]
    if not fits:
        raise NoFeasibleOfferingError(_why_infeasible(resources, offerings))
    fits.sort(
        key=lambda o: (
            _price(o, resources.use_spot),
            o.provider,
            o.region or "",
            o.zone or "",
            o.instance_type,
        )
    )
    chosen = fits[0]
    return Plan(
        chosen=chosen,
        candidates=fits,
        hourly_cost=(_price(chosen, resources.use_spot) or 0.0) * task.num_nodes,
    )


def _why_infeasible(resources: Resources, offerings: list[Offering]) -> str:
    where = [o for o in offerings if not resources.cloud or o.provider == resources.cloud]
    if not where:
        return f"no enabled provider matches infra {resources.infra!r}"
    largest = max(where, key=lambda o: (o.cpus, o.memory_gib))
    return (
        f"no offering satisfies {resources.describe()}; the largest is {largest.provider} "
        f"{largest.instance_type} with {largest.cpus:g} vCPUs and {largest.memory_gib:g} GiB memory"
    )
