"""The job index's rules: which report of a job a shard keeps, and which rows a listing gets.

Plain code (no Temporal), so ``JobIndexWorkflow`` stays a thin wrapper and the rules are
unit-tested directly. Reports of one job may arrive out of order (each is its own activity, and a
retried one may land late): the row with the highest ``seq`` wins, whatever the arrival order. A
job marked CANCELLING (its cancel taken) reads so until a report of its end lands, whatever
reports land meanwhile: the mark is not a report, and has no ``seq`` to order it by.
"""

from __future__ import annotations

from skyhop.contract.job_index import JobIndexRow, JobRowsFilter, ManagedJobStatus

__all__ = ["JobRows", "selected"]


def selected(row: JobIndexRow, wanted: JobRowsFilter) -> bool:
    """Whether ``row`` answers a ``rows`` query with ``wanted``."""
    if wanted.user is not None and row.user != wanted.user:
        return False
    if wanted.name is not None and row.summary.name != wanted.name:
        return False
    return not (wanted.active_only and row.summary.status.done)


class JobRows:
    """A shard's rows by job id, and its jobs marked CANCELLING; ``carried`` and
    ``carried_cancelling`` are what the next run starts from."""

    def __init__(self, rows: list[JobIndexRow], cancelling: list[int] | None = None) -> None:
        self.by_job: dict[int, JobIndexRow] = {}
        self.cancelling: set[int] = set()
        for row in rows:
            self.merge(row)
        self.mark_cancelling(cancelling or [])

    def merge(self, row: JobIndexRow) -> bool:
        """Keep ``row`` unless a report of the same job at least as recent is held; whether kept."""
        job_id = row.summary.job_id
        held = self.by_job.get(job_id)
        if held is not None and held.seq >= row.seq:
            return False
        self.by_job[job_id] = row
        if row.summary.status.done:
            self.cancelling.discard(job_id)
        return True

    def mark_cancelling(self, job_ids: list[int]) -> None:
        """The cancels of ``job_ids`` were taken: each not ended reads CANCELLING until its end lands
        (a job with no row yet too: its first report is on its way)."""
        for job_id in job_ids:
            held = self.by_job.get(job_id)
            if held is None or not held.summary.status.done:
                self.cancelling.add(job_id)

    def shown(self, row: JobIndexRow) -> JobIndexRow:
        """``row`` as a listing shows it: CANCELLING if its job is marked so."""
        if row.summary.job_id not in self.cancelling:
            return row
        summary = row.summary.model_copy(update={"status": ManagedJobStatus.CANCELLING})
        return row.model_copy(update={"summary": summary})

    def select(self, wanted: JobRowsFilter) -> list[JobIndexRow]:
        return [self.shown(row) for row in self.by_job.values() if selected(row, wanted)]

    def carried(self) -> list[JobIndexRow]:
        return list(self.by_job.values())

    def carried_cancelling(self) -> list[int]:
        return sorted(self.cancelling)
