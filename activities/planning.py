"""The optimize activity (short task queue)."""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import Hashable
from concurrent.futures import ThreadPoolExecutor

from temporalio import activity
from temporalio.exceptions import ApplicationError

from skyhop.activities.models import OptimizeInput
from skyhop.contract import ErrorType
from skyhop.optimizer import NoFeasibleOfferingError, Plan
from skyhop.optimizer import optimize as choose
from skyhop.optimizer.plan import load_offerings, offerings_stamp
from skyhop.providers.catalog import CatalogError, load_catalogs

__all__ = ["optimize"]

_OPTIMIZER = ThreadPoolExecutor(max_workers=2, thread_name_prefix="skyhop-optimize")
"""Optimizations' own threads: CPU work under the GIL gains nothing from more, and in the loop's
default pool they made the provider calls that share it (the sim's, boto3's) wait behind them."""

_PLANS: OrderedDict[tuple[str, Hashable], Plan] = OrderedDict()
"""Recent plans by request and ``offerings_stamp``, the least recently used dropped beyond
``_PLANS_KEPT``. A wave of preemptions asks the same question hundreds of times (each job's
relaunch, with the same region blocked), and at 10,000 jobs optimizing over a sim or cloud catalog
of 3,500 offerings was close to half of the worker's CPU while launching."""
_PLANS_KEPT = 256
_PLANS_LOCK = threading.Lock()


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
        return await asyncio.get_running_loop().run_in_executor(_OPTIMIZER, _plan, request)
    except NoFeasibleOfferingError as exc:
        raise ApplicationError(str(exc), type=ErrorType.NO_FEASIBLE_OFFERING, non_retryable=True) from None
    except CatalogError as exc:
        raise ApplicationError(str(exc), type=ErrorType.CATALOG_ERROR, non_retryable=True) from None


def _plan(request: OptimizeInput) -> Plan:
    """The plan from ``_PLANS`` if the same request was answered in the same world, else a new one.

    The stamp is taken before the optimizer reads anything: a file that changes meanwhile gives a
    plan newer than its key, never one older (the next request, with the new stamp, misses).
    """
    catalogs = load_catalogs()
    stamp = offerings_stamp(catalogs)
    key = None if stamp is None else (request.model_dump_json(), stamp)
    if key is not None:
        with _PLANS_LOCK:
            kept = _PLANS.get(key)
            if kept is not None:
                _PLANS.move_to_end(key)
                return kept
    found = choose(request.task, catalogs, blocklist=request.blocklist, minimize=request.minimize)
    plan = found.model_copy(update={"candidates": [found.chosen], "considered": [found.choice]})
    if key is not None:
        with _PLANS_LOCK:
            _PLANS[key] = plan
            while len(_PLANS) > _PLANS_KEPT:
                _PLANS.popitem(last=False)
    return plan
