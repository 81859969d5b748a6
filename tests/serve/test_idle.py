"""The load balancer's idle timers: one periodic check standing in for ``asyncio.timeout`` per request."""

from __future__ import annotations

import asyncio
import time

import pytest

from skyhop.serve.idle import IdleTimers


def test_an_idle_exchange_times_out_and_a_moving_one_does_not() -> None:
    async def scenario() -> None:
        timers = IdleTimers(tick=0.02)
        started = time.monotonic()
        with pytest.raises(TimeoutError), timers.timer(0.1):
            await asyncio.sleep(10)
        assert 0.1 <= time.monotonic() - started < 5  # long before the sleep's 10 s
        # 1 s in all, never 0.5 s without moving (a margin for a busy machine's late wake-ups).
        with timers.timer(0.5) as timer:
            for _ in range(20):
                await asyncio.sleep(0.05)
                timer.moved()
        with timers.timer(0.05) as timer:
            timer.disable()
            await asyncio.sleep(0.2)

    asyncio.run(scenario())


def test_a_cancel_from_elsewhere_stays_a_cancel() -> None:
    async def scenario() -> None:
        timers = IdleTimers(tick=0.02)

        async def waits() -> None:
            with timers.timer(10):
                await asyncio.sleep(10)

        task = asyncio.create_task(waits())
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
