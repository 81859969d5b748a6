"""Which workers a pool should bring up or let go: plain functions of its state, unit-tested.

A pool keeps ``workers_wanted`` workers of its current version (``PoolState.version``). Workers of an
older version go once idle (their replacements are brought up at once); beyond the wanted count,
idle workers go, newest first. A busy worker is never taken from its job: it goes, if it must, once
the job gives it back. A worker that is being brought up is let finish and judged once it is idle.
"""

from __future__ import annotations

from datetime import timedelta

from skyhop.contract.pools import PoolState, PoolWorker, WorkerStatus

__all__ = ["failure_backoff", "surplus_workers", "workers_to_add"]

_GONE = (WorkerStatus.FAILED, WorkerStatus.SHUTTING_DOWN)
_FIRST_BACKOFF = timedelta(seconds=10)
_MAX_BACKOFF = timedelta(minutes=10)


def _live(state: PoolState, leaving: set[int]) -> list[PoolWorker]:
    """The current version's workers that stay: not failed, not going."""
    return [
        w
        for w in state.workers
        if w.version == state.version and w.status not in _GONE and w.worker_id not in leaving
    ]


def workers_to_add(state: PoolState, leaving: set[int]) -> int:
    """How many new workers to bring up now."""
    if state.task is None:
        return 0
    return max(0, state.workers_wanted - len(_live(state, leaving)))


def surplus_workers(state: PoolState) -> dict[int, str | None]:
    """Idle workers to let go: worker id -> why (None: the pool is smaller now)."""
    idle = [w for w in state.workers if w.status == WorkerStatus.IDLE]
    surplus: dict[int, str | None] = {
        w.worker_id: f"set up with version {w.version}: replaced by version {state.version}"
        for w in idle
        if w.version != state.version
    }
    live = _live(state, set(surplus))
    extra = len(live) - state.workers_wanted
    for worker in sorted((w for w in live if w.status == WorkerStatus.IDLE), key=lambda w: -w.worker_id):
        if extra <= 0:
            break
        surplus[worker.worker_id] = None
        extra -= 1
    return surplus


def failure_backoff(failures: int) -> timedelta:
    """How long a worker that could not be brought up stays (FAILED, saying why) before a new one
    is tried in its place: 10 s, doubling to 10 minutes, so a setup that always fails does not
    launch clusters in a loop."""
    backoff: timedelta = _FIRST_BACKOFF * 2 ** min(max(failures - 1, 0), 10)
    return min(backoff, _MAX_BACKOFF)
