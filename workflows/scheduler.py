"""Which queued jobs start now: a pure function of the cluster's nodes, what runs, and the queue.

The policy is SkyPilot's: first in, first out, with head-of-line blocking. Jobs are considered in
submission order and each one that fits starts; the first that does not fit stops the pass, so a
large job at the head is never starved by smaller jobs behind it, and the order in which jobs
start is always the order in which they were submitted (predictable, and what SkyPilot users
expect). The cost is idle capacity while the head waits.

Resources are per node: vCPUs (a number, shares allowed) and GPUs by index. A GPU demand below 1
is a fraction of one GPU (several jobs share it); a demand of 1 or more takes that many whole
GPUs. A job on N nodes takes N distinct nodes, one rank each, lowest ranks first.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from pydantic import BaseModel, ConfigDict

from skyhop.contract.clusters import DEFAULT_CPU_DEMAND, Demand, NodeAllocation
from skyhop.providers.base import ClusterHandle
from skyhop.spec import Task

__all__ = [
    "DEFAULT_CPU_DEMAND",
    "Demand",
    "NodeAllocation",
    "NodeCapacity",
    "NodeFree",
    "capacity_of",
    "demand_of",
    "demand_problem",
    "free_resources",
    "place",
    "schedule",
]


_EPS = 1e-9


class NodeCapacity(BaseModel):
    """What one node of the cluster has."""

    model_config = ConfigDict(frozen=True)

    cpus: float
    gpus: dict[str, int] = {}
    """Accelerator name -> number of devices (indices 0..n-1)."""


class NodeFree:
    """Free resources on one node while a pass places jobs (mutable scratch, not state)."""

    def __init__(self, capacity: NodeCapacity) -> None:
        self.cpus = capacity.cpus
        self.gpus = {name: [1.0] * count for name, count in capacity.gpus.items()}

    def take(self, allocation: NodeAllocation) -> None:
        self.cpus -= allocation.cpus
        if allocation.gpu_name is not None:
            shares = self.gpus.setdefault(allocation.gpu_name, [])
            for gpu in allocation.gpu_ids:
                if gpu < len(shares):
                    shares[gpu] -= allocation.gpu_share

    def fit(self, node: int, demand: Demand) -> NodeAllocation | None:
        """The allocation ``demand`` would get here, or None when it does not fit now."""
        if demand.cpus > self.cpus + _EPS:
            return None
        if not demand.gpus:
            return NodeAllocation(node=node, cpus=demand.cpus)
        ((name, count),) = demand.gpus.items()
        shares = self.gpus.get(name, [])
        if count < 1:
            # Best fit: the most used GPU that still has room, so whole GPUs stay free for others.
            candidates = [(free, gpu) for gpu, free in enumerate(shares) if free + _EPS >= count]
            if not candidates:
                return None
            _, gpu = min(candidates)
            return NodeAllocation(node=node, cpus=demand.cpus, gpu_name=name, gpu_ids=[gpu], gpu_share=count)
        whole = [gpu for gpu, free in enumerate(shares) if free > 1 - _EPS]
        wanted = int(count)
        if len(whole) < wanted:
            return None
        return NodeAllocation(
            node=node, cpus=demand.cpus, gpu_name=name, gpu_ids=whole[:wanted], gpu_share=1.0
        )


def demand_problem(demand: Demand, nodes: Sequence[NodeCapacity]) -> str | None:
    """Why ``demand`` can never run on these nodes, even when they are idle; None if it can."""
    if len(demand.gpus) > 1:
        return f"a job can ask for one accelerator type, got {', '.join(demand.gpus)}"
    for name, count in demand.gpus.items():
        if count <= 0 or (count > 1 and not float(count).is_integer()):
            return f"{name}:{count:g}: a GPU count must be a fraction below 1 or a whole number"
    if demand.num_nodes > len(nodes):
        return f"{demand.num_nodes} nodes requested, the cluster has {len(nodes)}"
    idle = [NodeFree(capacity).fit(rank, demand) for rank, capacity in enumerate(nodes)]
    fitting = sum(1 for allocation in idle if allocation is not None)
    if fitting < demand.num_nodes:
        return f"only {fitting} of the cluster's nodes can hold {_describe(demand)} even when idle"
    return None


def free_resources(
    nodes: Sequence[NodeCapacity], taken: Sequence[Sequence[NodeAllocation]]
) -> list[NodeFree]:
    """Each node's free resources once the allocations of running jobs are taken out."""
    free = [NodeFree(capacity) for capacity in nodes]
    for placement in taken:
        for allocation in placement:
            if allocation.node < len(free):
                free[allocation.node].take(allocation)
    return free


def place(free: list[NodeFree], demand: Demand) -> list[NodeAllocation] | None:
    """Place one job on ``num_nodes`` distinct nodes (lowest ranks first) and take it from ``free``."""
    placement: list[NodeAllocation] = []
    for rank, node in enumerate(free):
        allocation = node.fit(rank, demand)
        if allocation is not None:
            placement.append(allocation)
            if len(placement) == demand.num_nodes:
                break
    if len(placement) < demand.num_nodes:
        return None
    for allocation in placement:
        free[allocation.node].take(allocation)
    return placement


def schedule(
    nodes: Sequence[NodeCapacity],
    taken: Sequence[Sequence[NodeAllocation]],
    queue: Iterable[Demand],
) -> list[list[NodeAllocation]]:
    """Placements for the jobs at the head of ``queue`` that start now, in queue order.

    The result is a prefix of ``queue``: FIFO with head-of-line blocking. ``queue`` is read only up
    to the first job that does not fit, so it may be a generator over a long queue.
    """
    free = free_resources(nodes, taken)
    started: list[list[NodeAllocation]] = []
    for demand in queue:
        placement = place(free, demand)
        if placement is None:
            break
        started.append(placement)
    return started


def _describe(demand: Demand) -> str:
    gpus = "".join(f", {name}:{count:g}" for name, count in demand.gpus.items())
    return f"{demand.cpus:g} CPU{gpus}"


def demand_of(task: Task) -> Demand:
    """A task's per-node demand: its ``cpus`` (at least that many, else the default) and GPUs."""
    cpus = task.resources.cpu_quantity
    return Demand(
        cpus=cpus.value if cpus is not None else DEFAULT_CPU_DEMAND,
        gpus=dict(task.resources.accelerators or {}),
        num_nodes=task.num_nodes,
    )


def capacity_of(handle: ClusterHandle) -> list[NodeCapacity]:
    """Every node of a cluster has its offering's vCPUs and accelerators."""
    offering = handle.offering
    gpus = {name.upper(): math.ceil(count) for name, count in offering.accelerators.items()}
    return [NodeCapacity(cpus=offering.cpus, gpus=gpus) for _ in handle.nodes]
