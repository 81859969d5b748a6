"""The job index's rules: which report of a job a shard keeps, and which rows a listing gets.

Plain code (no Temporal), so ``JobIndexWorkflow`` stays a thin wrapper and the rules are
unit-tested directly. Reports of one job may arrive out of order (each is its own activity, and a
retried one may land late): the row with the highest ``seq`` wins, whatever the arrival order.
"""

from __future__ import annotations

from skyhop.contract.managed_jobs import JobIndexRow, JobRowsFilter

__all__ = ["JobRows", "selected"]


def selected(row: JobIndexRow, wanted: JobRowsFilter) -> bool:
    """Whether ``row`` answers a ``rows`` query with ``wanted``."""
    if wanted.user is not None and row.user != wanted.user:
        return False
    if wanted.name is not None and row.summary.name != wanted.name:
        return False
    return not (wanted.active_only and row.summary.status.done)


class JobRows:
    """A shard's rows by job id; ``carried`` is what the next run starts from."""

    def __init__(self, rows: list[JobIndexRow]) -> None:
        self.by_job: dict[int, JobIndexRow] = {}
        for row in rows:
            self.merge(row)

    def merge(self, row: JobIndexRow) -> bool:
        """Keep ``row`` unless a report of the same job at least as recent is held; whether kept."""
        held = self.by_job.get(row.summary.job_id)
        if held is not None and held.seq >= row.seq:
            return False
        self.by_job[row.summary.job_id] = row
        return True

    def select(self, wanted: JobRowsFilter) -> list[JobIndexRow]:
        return [row for row in self.by_job.values() if selected(row, wanted)]

    def carried(self) -> list[JobIndexRow]:
        return list(self.by_job.values())
