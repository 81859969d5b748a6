"""When a job group's auxiliary tasks are stopped: each ``termination_delay`` after the primary tasks ended.

Plain and deterministic (times are passed in, from ``workflow.now()``): ``ManagedJobWorkflow``
schedules the stops once every primary task has ended, waits for the next one with a durable
timer (the ``timeout`` of its ``workflow.wait``), and stops the tasks whose time has come.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Generic, TypeVar

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from skyhop.contract.job_index import ManagedJobStatus
    from skyhop.contract.managed_jobs import EndReason, JobEnd

__all__ = ["AuxiliaryStops", "auxiliary_end"]

Run = TypeVar("Run")


def auxiliary_end(delay_seconds: float) -> JobEnd:
    """The end of an auxiliary task stopped ``delay_seconds`` after the primary tasks ended."""
    message = (
        f"stopped {delay_seconds:g}s after the group's primary tasks ended (termination_delay)"
        if delay_seconds
        else "stopped once the group's primary tasks ended"
    )
    return JobEnd(status=ManagedJobStatus.CANCELLED, reason=EndReason.PRIMARY_TASKS_ENDED, message=message)


class AuxiliaryStops(Generic[Run]):
    """The auxiliary runs still to stop, each with the time it is stopped at (Unix seconds)."""

    def __init__(self) -> None:
        self.scheduled = False
        """Whether the primary tasks have ended and the stops are set (once per job)."""
        self._at: list[tuple[float, float, Run]] = []
        """(time to stop, delay, run), in the order the runs were given."""

    def schedule(self, runs: Iterable[tuple[Run, float]], now: float) -> None:
        """The primary tasks have ended: stop each ``(run, delay_seconds)`` that long from ``now``."""
        self.scheduled = True
        self._at = [(now + delay, delay, run) for run, delay in runs]

    def forget(self, run: Run) -> None:
        """``run`` ended by itself: nothing to stop."""
        self._at = [entry for entry in self._at if entry[2] is not run]

    def due(self, now: float) -> list[tuple[Run, float]]:
        """The runs to stop now, with their delays; they are no longer scheduled."""
        due = [(run, delay) for at, delay, run in self._at if at <= now]
        self._at = [entry for entry in self._at if entry[0] > now]
        return due

    def next_in(self, now: float) -> float | None:
        """Seconds until the next stop; None when none is scheduled."""
        return min(at for at, _, _ in self._at) - now if self._at else None
