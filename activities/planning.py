"""The optimize activity (short task queue)."""

from __future__ import annotations

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.models import OptimizeInput
from optimizer import NoFeasibleOfferingError, Plan
from optimizer import optimize as choose
from providers.registry import get_provider, provider_names

__all__ = ["optimize"]


@activity.defn
async def optimize(request: OptimizeInput) -> Plan:
    """Choose the cheapest offering that fits the task; infeasible requests are not retried."""
    offerings = [o for name in provider_names() for o in get_provider(name).offerings()]
    try:
        return choose(request.task, offerings)
    except NoFeasibleOfferingError as exc:
        raise ApplicationError(str(exc), type="NoFeasibleOffering", non_retryable=True) from None
