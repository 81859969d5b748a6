"""The rules of the provision stage's failover, as pure functions the workflow applies.

* A classified failure blocks a scope (SkyPilot's): capacity the zone tried, for that instance
  type (the region where the candidate has no zone); quota the region, for that type; credentials
  or a missing feature the whole provider. A fatal failure blocks nothing and ends the launch.
* Once an attempt asked a region's autoscaler for nodes (``SCALE_UP_ASKED``), every later attempt
  of the launch names that region (``scaled_up_region``) and may wait for new nodes only there:
  those nodes may still come, and a second cluster scaling up for the same launch is waste.
* ``--retry-until-up`` restarts the search after 30 s, doubling up to 10 min, with jitter so
  that many launches waiting on one full zone do not retry in lockstep.
"""

from __future__ import annotations

from datetime import timedelta

from skyhop.contract.clusters import FailoverAttempt
from skyhop.optimizer.blocklist import Blocked
from skyhop.providers.base import Offering
from skyhop.providers.errors import SCALE_UP_ASKED, FailureScope

__all__ = ["RETRY_FIRST", "RETRY_MAX", "block_for", "history_table", "retry_delay", "scaled_up_region"]

RETRY_FIRST = timedelta(seconds=30)
RETRY_MAX = timedelta(minutes=10)


def block_for(offering: Offering, scope: FailureScope) -> Blocked | None:
    """The blocklist entry a failure of ``scope`` at ``offering`` adds, or None when it adds none."""
    if scope == FailureScope.ZONE:
        return Blocked(
            provider=offering.provider,
            region=offering.region,
            zone=offering.zone,
            instance_type=offering.instance_type,
        )
    if scope == FailureScope.REGION:
        return Blocked(
            provider=offering.provider, region=offering.region, instance_type=offering.instance_type
        )
    if scope == FailureScope.PROVIDER:
        return Blocked(provider=offering.provider)
    return None


def scaled_up_region(attempts: list[FailoverAttempt]) -> str | None:
    """The region of the first failed attempt that asked its autoscaler for nodes, or None."""
    return next((a.region for a in attempts if a.code == SCALE_UP_ASKED), None)


def retry_delay(searches_failed: int, jitter: float) -> timedelta:
    """How long to wait before search number ``searches_failed + 1``; ``jitter`` in [0, 1)."""
    base: timedelta = min(RETRY_FIRST * (2 ** (searches_failed - 1)), RETRY_MAX)
    return base * (1 + 0.2 * jitter)


def history_table(attempts: list[FailoverAttempt]) -> str:
    """What was tried and why it failed, one aligned row per attempt."""
    rows = [("INFRA", "INSTANCE", "REASON")] + [
        (a.location, a.instance_type, f"{a.kind} ({a.code}): {a.message}") for a in attempts
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(2)]
    return "\n".join(f"  {r[0].ljust(widths[0])}  {r[1].ljust(widths[1])}  {r[2]}" for r in rows)
