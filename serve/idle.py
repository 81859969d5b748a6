"""Idle timeouts for every exchange the load balancer has in flight, from one periodic check.

``asyncio.timeout`` arms a loop timer per use: under uvloop that is a libuv timer started, stopped
and closed for every request, about a tenth of the proxy's own time per request. An exchange here
only writes its deadline into a slot; one timer, ticking while any exchange is in flight, cancels
the tasks whose deadline passed, which then raise ``TimeoutError`` as ``asyncio.timeout`` would.
A timeout fires up to one tick late: ticks are short beside the response timeout they serve.
"""

from __future__ import annotations

import asyncio
import math
from types import TracebackType

__all__ = ["IdleTimer", "IdleTimers"]


class IdleTimers:
    """The timers of one event loop, checked every ``tick`` seconds while any is running."""

    def __init__(self, tick: float) -> None:
        self._tick = tick
        self._running: set[IdleTimer] = set()
        self._check_handle: asyncio.TimerHandle | None = None

    def timer(self, seconds: float) -> IdleTimer:
        """A timer for a ``with`` block: ``TimeoutError`` once ``seconds`` pass without ``moved()``."""
        return IdleTimer(self, seconds)

    def _start(self, timer: IdleTimer, loop: asyncio.AbstractEventLoop) -> None:
        self._running.add(timer)
        if self._check_handle is None:
            self._check_handle = loop.call_later(self._tick, self._check, loop)

    def _stop(self, timer: IdleTimer) -> None:
        self._running.discard(timer)

    def _check(self, loop: asyncio.AbstractEventLoop) -> None:
        now = loop.time()
        for timer in self._running:
            timer.expire_if_due(now)
        self._check_handle = loop.call_later(self._tick, self._check, loop) if self._running else None


class IdleTimer:
    """One exchange's idle timer (see ``IdleTimers.timer``)."""

    __slots__ = ("_cancelling", "_deadline", "_expired", "_loop", "_seconds", "_task", "_timers")

    def __init__(self, timers: IdleTimers, seconds: float) -> None:
        self._timers = timers
        self._seconds = seconds
        self._expired = False

    def __enter__(self) -> IdleTimer:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("IdleTimer must be used inside a task")
        self._task = task
        self._cancelling = task.cancelling()
        self._loop = loop = asyncio.get_running_loop()
        self._deadline = loop.time() + self._seconds
        self._timers._start(self, loop)
        return self

    def moved(self) -> None:
        """Bytes came: the idle time starts again."""
        self._deadline = self._loop.time() + self._seconds

    def disable(self) -> None:
        """No timeout from now on (a tunnel, idle for as long as its ends like)."""
        self._deadline = math.inf

    def expire_if_due(self, now: float) -> None:
        if not self._expired and self._deadline <= now:
            self._expired = True
            self._task.cancel()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._timers._stop(self)
        # As asyncio.timeout: our cancel becomes TimeoutError; anyone else's cancel stays one.
        if self._expired and self._task.uncancel() <= self._cancelling and exc_type is asyncio.CancelledError:
            raise TimeoutError from exc
