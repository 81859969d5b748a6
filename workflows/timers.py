"""``uncancelled_timer``: a durable timer that fires even when nothing waits for it any more.

A waiter that stops early (a replica scaled down while it sleeps between probes, a drain that ended
before its deadline) cancels its timer with ``workflow.sleep`` or ``wait_condition(timeout=)``.
The cancel can race the timer's firing: the timer fires while the workflow task that cancels it
is with the worker. The real server drops the fire then. The time-skipping test server refuses
that task's completion for good instead, which wedges the run and stops the server's clock
(sdk-java#2606, #3088), so a test that skips time hangs. A timer nobody cancels cannot race: it
fires once, later, into a future nobody reads (its event, where a cancel's would have been).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

__all__ = ["uncancelled_timer"]


def uncancelled_timer(duration: timedelta) -> asyncio.Future[None]:
    """A future set when ``duration`` of workflow time has passed. Cancelling a task that awaits
    it cancels only the future; the timer still fires, into a future already done. The timer
    starts at the call, as ``workflow.sleep``'s does, so code that swaps one for the other sends
    its commands in the same order."""
    loop = asyncio.get_running_loop()
    fired: asyncio.Future[None] = loop.create_future()
    loop.call_later(duration.total_seconds(), lambda: None if fired.done() else fired.set_result(None))
    return fired
