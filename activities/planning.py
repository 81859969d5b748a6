"""The optimize activity (short task queue)."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

from temporalio import activity
from temporalio.exceptions import ApplicationError

from skyhop.activities.models import OptimizeInput
from skyhop.contract import ErrorType
from skyhop.optimizer import NoFeasibleOfferingError, Plan
from skyhop.optimizer import optimize as choose
from skyhop.optimizer.plan import load_offerings
from skyhop.providers.catalog import CatalogError, load_catalogs

__all__ = ["optimize"]

_OPTIMIZER = ThreadPoolExecutor(max_workers=2, thread_name_prefix="skyhop-optimize")
"""Optimizations' own threads: CPU work under the GIL gains nothing from more, and in the loop's
default pool they made the provider calls that share it (the sim's, boto3's) wait behind them."""


@activity.defn
async def optimize(request: OptimizeInput) -> Plan:
    """Choose the best offering that fits the task and is not blocklisted; never retried when none does.

    The plan comes back with its choice alone, which is all a workflow reads of it: it is recorded
    in the history (a local activity's marker) at every launch and relaunch, and its eight kept
    candidates, listed twice, made a sim task's 6.9 KB; 1.4 KB without them.
    """
    pinned = {alternative.cloud for alternative in request.task.resources.alternatives}
    await load_offerings(None if None in pinned else {cloud for cloud in pinned if cloud})
    try:
        # CPU work (tens of ms over a large catalog), off the event loop: every workflow task, hub
        # poll and heartbeat of the worker waits on that loop, and each managed job's launch and
        # relaunch optimizes.
        plan = await asyncio.get_running_loop().run_in_executor(
            _OPTIMIZER,
            lambda: choose(
                request.task, load_catalogs(), blocklist=request.blocklist, minimize=request.minimize
            ),
        )
    except NoFeasibleOfferingError as exc:
        raise ApplicationError(str(exc), type=ErrorType.NO_FEASIBLE_OFFERING, non_retryable=True) from None
    except CatalogError as exc:
        raise ApplicationError(str(exc), type=ErrorType.CATALOG_ERROR, non_retryable=True) from None
    return plan.model_copy(update={"candidates": [plan.chosen], "considered": [plan.choice]})
