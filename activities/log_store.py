"""Where a managed job's output is kept, off its nodes, so recoveries and teardowns lose none of it.

The design's object store for bytes (Temporal holds references only). On the embedded default it
is a private folder under ``$SKYHOP_HOME/store``; the worker's job watcher appends each attempt's
output there as the job runs (a preempted node takes at most the last poll's bytes with it), and
``jobs logs`` reads the attempts back in order.
"""

from __future__ import annotations

from pathlib import Path

from skyhop.providers.home import private_dir, skyhop_home

__all__ = ["attempt_log", "job_log_dir"]


def job_log_dir(job_id: int) -> Path:
    """The folder of a managed job's logs: ``task-<k>/attempt-<n>.log`` below it."""
    return private_dir(skyhop_home() / "store") / "managed-jobs" / str(job_id)


def attempt_log(job_id: int, task_index: int, attempt: int) -> Path:
    """The file holding one attempt's output (rank 0's, as ``skyhop logs`` shows a job)."""
    return job_log_dir(job_id) / f"task-{task_index}" / f"attempt-{attempt}.log"
