"""Whether a task fits a cluster that already exists (``launch`` on it, or ``exec``)."""

from __future__ import annotations

from skyhop.providers.base import Offering
from skyhop.spec import Resources

__all__ = ["mismatch"]


def mismatch(resources: Resources, num_nodes: int, cluster: Offering, cluster_nodes: int) -> str | None:
    """Why a request does not fit the cluster, or None when it does.

    A request fits when it asks for no more than the cluster has: SkyPilot's "less demanding than".
    With ``any_of``/``ordered`` alternatives, it fits when one of them does.
    """
    wanted = f"Requested: {num_nodes}x {resources.describe()}"
    every = [_reasons(alt, num_nodes, cluster, cluster_nodes) for alt in resources.alternatives]
    if not all(every):
        return None
    have = (
        f"Existing: {cluster_nodes}x {cluster.provider} {cluster.instance_type} "
        f"({cluster.cpus:g} vCPUs, {cluster.memory_gib:g} GiB"
        + "".join(f", {n}:{c:g}" for n, c in cluster.accelerators.items())
        + ")"
    )
    reasons = list(dict.fromkeys(r for found in every for r in found))
    return (
        f"requested resources do not fit the existing cluster ({', '.join(reasons)}). {wanted}. {have}. "
        "To fix: use a new cluster name, or take this one down first"
    )


def _reasons(resources: Resources, num_nodes: int, cluster: Offering, cluster_nodes: int) -> list[str]:
    reasons = []
    if num_nodes > cluster_nodes:
        reasons.append("more nodes")
    if resources.cloud and resources.cloud != cluster.provider:
        reasons.append(f"infra {resources.cloud}")
    if resources.region and resources.region != cluster.region:
        reasons.append(f"region {resources.region}")
    if resources.instance_type and resources.instance_type != cluster.instance_type:
        reasons.append(f"instance type {resources.instance_type}")
    cpus, memory = resources.cpu_quantity, resources.memory_quantity
    if cpus and cpus.value > cluster.cpus:
        reasons.append("more vCPUs")
    if memory and (memory.value * (cluster.cpus if memory.per_cpu else 1)) > cluster.memory_gib:
        reasons.append("more memory")
    offered = {name.upper(): count for name, count in cluster.accelerators.items()}
    for name, count in (resources.accelerators or {}).items():
        if offered.get(name, 0.0) + 1e-9 < count:
            reasons.append(f"{name}:{count:g}")
    return reasons
