"""What moving a task's outputs to the next task costs: dollars and hours.

Within one region it is free. Between regions of one cloud it costs the cloud's inter-region rate
and moves at ~25 Gbps; leaving a cloud costs its (tiered) internet egress and moves at ~10 Gbps,
as SkyPilot assumes. Providers without a catalog (``local``) charge nothing for uploads.
"""

from __future__ import annotations

from skyhop.providers.catalog import policy_for

__all__ = ["egress"]


def egress(
    src_provider: str, src_region: str | None, dst_provider: str, dst_region: str | None, gb: float
) -> tuple[float, float]:
    """($, hours) to move ``gb`` from one place to another."""
    if gb <= 0 or (src_provider, src_region) == (dst_provider, dst_region):
        return 0.0, 0.0
    policy = policy_for(src_provider)
    same_cloud = src_provider == dst_provider
    if policy is None:
        cost = 0.0
        gbps = 25.0 if same_cloud else 10.0
    elif same_cloud:
        cost, gbps = policy.inter_region_egress * gb, policy.egress_bandwidth_gbps["region"]
    else:
        cost, gbps = policy.egress_cost(gb), policy.egress_bandwidth_gbps["cloud"]
    return cost, gb * 8 / gbps / 3600
