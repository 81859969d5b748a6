"""``TaskBook``: the bookkeeping of one managed task's attempts, shared by the ways a task runs.

A task on a cluster of its own (``workflows.managed_task``) and a task on a pool's worker
(``workflows.pool_job``) record their attempts, clocks and statuses the same way, so ``jobs queue``
and ``jobs logs`` read them alike. Workflow code: it reads the clock through ``workflow.now``.
"""

from __future__ import annotations

from collections.abc import Callable

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from skyhop.contract.job_index import ManagedJobStatus
    from skyhop.contract.managed_jobs import EndReason, JobEnd, ManagedTaskState, TaskAttempt

__all__ = ["TaskBook"]


class TaskBook:
    """Task ``state``'s attempts and status; ``changed`` publishes the job after a status change."""

    def __init__(self, state: ManagedTaskState, changed: Callable[[], None]) -> None:
        self.state = state
        self._changed = changed

    def _open_attempt(self, location: TaskAttempt | None = None) -> TaskAttempt:
        """The attempt under way: the open one a resumed run left, else a new one (on ``location``'s
        cluster, for a restart)."""
        attempts = self.state.attempts
        if attempts and attempts[-1].ended_at is None:
            return attempts[-1]
        attempt = TaskAttempt(
            number=attempts[-1].number + 1 if attempts else 1,
            cluster_name=self.state.cluster_name,
            started_at=workflow.now().timestamp(),
        )
        if location is not None:
            attempt = attempt.model_copy(
                update=location.model_dump(include={"location", "provider", "region"})
            )
        attempts.append(attempt)
        return attempt

    def _close_attempt(self, outcome: str) -> None:
        attempts = self.state.attempts
        if attempts and attempts[-1].ended_at is None:
            attempts[-1].ended_at = workflow.now().timestamp()
            attempts[-1].outcome = outcome

    def _end_attempt_with(
        self,
        status: ManagedJobStatus,
        reason: EndReason,
        message: str,
        outcome: str,
        exit_code: int | None = None,
    ) -> JobEnd:
        """The task's end; its attempt's ``outcome`` says it in a few words."""
        self._close_attempt(outcome)
        return JobEnd(status=status, reason=reason, message=message, exit_code=exit_code)

    def _stop_clock(self) -> None:
        state = self.state
        if state.running_since is not None:
            state.job_seconds += workflow.now().timestamp() - state.running_since
            state.running_since = None

    def _set(self, status: ManagedJobStatus) -> None:
        if self.state.status != status:
            self.state.status = status
            self._changed()
