"""How each cloud's catalog is read into choices: SkyPilot's rules, so both pick the same machine.

* A request without cpus or memory means ``8+`` vCPUs; without memory, ``x4`` (4 GiB per vCPU).
  These defaults, and the instance families a CPU-only request picks from, are per cloud: current
  general-purpose, memory- and compute-optimised families, not burstable or exotic ones.
* GCP bills some GPUs separately and attaches them to an N1 host VM. The host is the cheapest N1
  with a vCPU count that suits the GPU count (8 per V100, 4 per T4...) and 4 GiB per vCPU, within
  what GCP lets a host carry for that GPU.
* GCP prices and reserves per zone, so each zone is its own candidate; AWS and Azure on-demand
  prices are regional (one candidate per region) while AWS spot prices differ per zone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["GCP_BUILTIN_ACCELERATORS", "CatalogPolicy", "HostRule", "gcp_builtin_accelerator", "policy_for"]


@dataclass(frozen=True)
class HostRule:
    """Which host VMs a separately billed accelerator attaches to, and how large by default."""

    host_prefixes: tuple[str, ...]
    default_cpus: dict[str, dict[int, int]]
    """Accelerator -> count -> vCPUs of the default host; ``DEFAULT`` for any other accelerator."""
    limits: dict[str, dict[int, tuple[int, int]]]
    """Accelerator -> count -> (most vCPUs, most GiB) a host may have; counts not listed cannot attach."""
    memory_per_cpu: float = 4.0

    def host_cpus(self, accelerator: str, count: float) -> int | None:
        """Default host vCPUs for ``count`` accelerators, or None when that count is not offered."""
        table = self.default_cpus.get(accelerator, self.default_cpus["DEFAULT"])
        return table.get(int(count)) if float(count).is_integer() else None

    def limit(self, accelerator: str, count: float) -> tuple[int, int] | None:
        """(most vCPUs, most GiB) of a host for ``count`` accelerators; None when unlimited/unknown."""
        return self.limits.get(accelerator, {}).get(int(count))


@dataclass(frozen=True)
class CatalogPolicy:
    """The reading rules of one cloud's catalog."""

    provider: str
    default_family: re.Pattern[str]
    """Instance types a request without accelerators or instance type chooses from."""
    default_cpus: float = 8.0
    default_memory_per_cpu: float = 4.0
    zoned_on_demand: bool = False
    """Whether on-demand candidates are per zone (GCP) rather than per region."""
    rank_accelerator_types_by_spot: bool = True
    """Whether spot requests rank accelerator instance types by spot price (else on-demand)."""
    host: HostRule | None = None
    internet_egress: tuple[tuple[float, float], ...] = ((1.0, 0.0), (10 * 1024, 0.09), (float("inf"), 0.085))
    """Tiers of (up to GB, $/GB) for data leaving the cloud."""
    inter_region_egress: float = 0.02
    """$/GB between two regions of this cloud."""
    egress_bandwidth_gbps: dict[str, float] = field(default_factory=lambda: {"region": 25.0, "cloud": 10.0})

    def egress_cost(self, gigabytes: float) -> float:
        """$ for ``gigabytes`` leaving this cloud for the internet or another cloud (tiered)."""
        cost, start = 0.0, 0.0
        for upto, rate in self.internet_egress:
            if gigabytes <= start:
                break
            cost += (min(gigabytes, upto) - start) * rate
            start = upto
        return cost


_GCP_GPU_HOST = HostRule(
    host_prefixes=("n1-standard-", "n1-highmem-", "n1-highcpu-"),
    default_cpus={
        "K80": {1: 4, 2: 8, 4: 16, 8: 32, 16: 64},
        "V100": {1: 8, 2: 16, 4: 32, 8: 64},
        "T4": {1: 4, 2: 8, 4: 48},
        "P100": {1: 8, 2: 16, 4: 32, 8: 64},
        "DEFAULT": {1: 8, 2: 16, 4: 32, 8: 64, 16: 128},
    },
    limits={
        "K80": {1: (8, 52), 2: (16, 104), 4: (32, 208), 8: (64, 208)},
        "V100": {1: (12, 78), 2: (24, 156), 4: (48, 312), 8: (96, 624)},
        "T4": {1: (48, 312), 2: (48, 312), 4: (96, 624)},
        "P4": {1: (24, 156), 2: (48, 312), 4: (96, 624)},
        "P100": {1: (16, 104), 2: (32, 208), 4: (96, 624)},
    },
)

_POLICIES = {
    "aws": CatalogPolicy(
        provider="aws",
        default_family=re.compile(r"^(m6i|m6id|m7i|r6i|r6id|r7i|c6i|c6id|c7i)\."),
    ),
    "gcp": CatalogPolicy(
        provider="gcp",
        default_family=re.compile(r"^n[24]-(standard|highmem|highcpu)-"),
        zoned_on_demand=True,
        rank_accelerator_types_by_spot=False,
        host=_GCP_GPU_HOST,
        internet_egress=((1024, 0.12), (10 * 1024, 0.11), (float("inf"), 0.08)),
        inter_region_egress=0.01,
    ),
    "azure": CatalogPolicy(
        provider="azure",
        default_family=re.compile(r"^Standard_([DE]\d+s_v5|F\d+s_v2)(_Promo)?$"),
        internet_egress=((5.0, 0.0), (10 * 1024, 0.087), (float("inf"), 0.083)),
    ),
}


def policy_for(provider: str) -> CatalogPolicy | None:
    """The reading rules of ``provider``'s catalog, or None for providers without a catalog."""
    return _POLICIES.get(provider)


_GCP_BUILTIN = [
    (re.compile(r"^a2-highgpu-(\d+)g$"), "A100", None),
    (re.compile(r"^a2-megagpu-(\d+)g$"), "A100", None),
    (re.compile(r"^a2-ultragpu-(\d+)g$"), "A100-80GB", None),
    (re.compile(r"^a3-highgpu-(\d+)g$"), "H100", None),
    (re.compile(r"^a3-megagpu-(\d+)g$"), "H100-MEGA", None),
    (re.compile(r"^a3-ultragpu-(\d+)g$"), "H200", None),
    (re.compile(r"^a4-highgpu-(\d+)g$"), "B200", None),
    (re.compile(r"^g2-standard-(\d+)$"), "L4", {4: 1, 8: 1, 12: 1, 16: 1, 32: 1, 24: 2, 48: 4, 96: 8}),
    (re.compile(r"^g4-standard-(\d+)$"), "RTXPRO6000", {48: 1, 96: 2, 192: 4, 384: 8}),
]
GCP_BUILTIN_ACCELERATORS = frozenset(name for _, name, _ in _GCP_BUILTIN)
"""GPUs GCP sells only inside their own machine family, never attached to an N1 host."""


def gcp_builtin_accelerator(instance_type: str) -> tuple[str, int] | None:
    """The GPUs a GCP accelerator-optimised machine type comes with (``a2-highgpu-8g`` -> A100 x8).

    GCP's price list and SkyPilot's catalog price these GPUs apart from the VM, but they cannot be
    had without it nor it without them, so skyhop's catalog folds them into one row.
    """
    for pattern, name, by_size in _GCP_BUILTIN:
        match = pattern.match(instance_type)
        if match:
            size = int(match.group(1))
            count = by_size.get(size) if by_size is not None else size
            return (name, count) if count else None
    return None
