"""Managed-job states and log-store files for tests that need a job without running one."""

from __future__ import annotations

import time
from pathlib import Path

from skyhop.activities.log_store import attempt_log
from skyhop.contract.managed_jobs import ManagedJobState, ManagedJobStatus, ManagedTaskState, TaskAttempt

__all__ = ["attempt", "job_state", "write_attempt"]


def attempt(number: int, *, location: str | None = "sim/r1/r1a", outcome: str | None = None) -> TaskAttempt:
    """An attempt, ended with ``outcome`` when one is given."""
    now = time.time()
    return TaskAttempt(
        number=number,
        cluster_name="job-1",
        location=location,
        started_at=now,
        ended_at=now if outcome is not None else None,
        outcome=outcome,
    )


def job_state(
    job_id: int, attempts: list[list[TaskAttempt]], status: ManagedJobStatus = ManagedJobStatus.RUNNING
) -> ManagedJobState:
    """A job whose task ``k`` had ``attempts[k]``."""
    tasks = [
        ManagedTaskState(
            index=index,
            name=f"t{index}",
            status=status,
            cluster_name=f"job-{job_id}",
            task_id=f"sky-managed-0_x_{job_id}-{index}",
            recoveries=max(len(tried) - 1, 0),
            attempts=tried,
        )
        for index, tried in enumerate(attempts)
    ]
    return ManagedJobState(
        job_id=job_id,
        name="x",
        user="tester",
        status=status,
        submitted_at=time.time(),
        resources="1x[any]",
        tasks=tasks,
    )


def write_attempt(job_id: int, task_index: int, number: int, text: str) -> Path:
    """Append ``text`` to an attempt's log in the store, as the job's watcher does."""
    path = attempt_log(job_id, task_index, number)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as log:
        log.write(text)
    return path
