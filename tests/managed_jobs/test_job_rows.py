"""The job index's merging rules (``workflows.job_rows``), without Temporal."""

from __future__ import annotations

from skyhop.contract.job_index import JobRowsFilter, ManagedJobStatus
from skyhop.workflows.job_rows import JobRows
from tests.managed_jobs.support import index_row


def test_the_highest_sequence_wins_whatever_the_arrival_order() -> None:
    rows = JobRows([])
    assert rows.merge(index_row(7, ManagedJobStatus.PENDING, 1))
    assert rows.merge(index_row(7, ManagedJobStatus.SUCCEEDED, 4))
    assert not rows.merge(index_row(7, ManagedJobStatus.RUNNING, 3)), "a late RUNNING overwrote SUCCEEDED"
    assert not rows.merge(index_row(7, ManagedJobStatus.RUNNING, 4)), "a retried report is kept once"
    assert [row.summary.status for row in rows.carried()] == [ManagedJobStatus.SUCCEEDED]


def test_rows_carried_into_a_new_run_keep_the_newest_of_each_job() -> None:
    carried = [
        index_row(1, ManagedJobStatus.RUNNING, 3),
        index_row(1, ManagedJobStatus.STARTING, 2),
        index_row(2, ManagedJobStatus.PENDING, 1),
    ]
    rows = JobRows(carried)
    assert {row.summary.job_id: row.seq for row in rows.carried()} == {1: 3, 2: 1}
    assert not rows.merge(index_row(1, ManagedJobStatus.STARTING, 2))


def test_filters_select_by_user_name_and_done_ness() -> None:
    rows = JobRows(
        [
            index_row(1, ManagedJobStatus.RUNNING, 1),
            index_row(2, ManagedJobStatus.FAILED, 1),
            index_row(3, ManagedJobStatus.RECOVERING, 1, user="bo"),
            index_row(4, ManagedJobStatus.CANCELLED, 1, name="eval"),
        ]
    )

    def ids(wanted: JobRowsFilter) -> list[int]:
        return sorted(row.summary.job_id for row in rows.select(wanted))

    assert ids(JobRowsFilter()) == [1, 2, 3, 4]
    assert ids(JobRowsFilter(user="al")) == [1, 2, 4]
    assert ids(JobRowsFilter(active_only=True)) == [1, 3]
    assert ids(JobRowsFilter(user="al", active_only=True)) == [1]
    assert ids(JobRowsFilter(name="eval")) == [4]
    assert ids(JobRowsFilter(user="bo", name="eval")) == []


def _shown(rows: JobRows) -> dict[int, ManagedJobStatus]:
    """Each job's status as a listing shows it."""
    return {row.summary.job_id: row.summary.status for row in rows.select(JobRowsFilter())}


def test_a_job_marked_cancelling_reads_so_until_its_end_lands_whatever_lands_before() -> None:
    rows = JobRows([index_row(1, ManagedJobStatus.RUNNING, 2), index_row(2, ManagedJobStatus.SUCCEEDED, 5)])
    rows.mark_cancelling([1, 2, 3])  # 2 had ended; 3 has not reported yet

    assert _shown(rows) == {1: ManagedJobStatus.CANCELLING, 2: ManagedJobStatus.SUCCEEDED}
    assert rows.merge(index_row(1, ManagedJobStatus.RECOVERING, 3)), "a report on its way at the cancel"
    assert rows.merge(index_row(3, ManagedJobStatus.PENDING, 1))
    assert _shown(rows)[1] == _shown(rows)[3] == ManagedJobStatus.CANCELLING
    assert [row.summary.job_id for row in rows.select(JobRowsFilter(active_only=True))] == [1, 3]

    carried = JobRows(rows.carried(), rows.carried_cancelling())  # across a continue-as-new
    assert carried.carried_cancelling() == [1, 3]
    assert carried.merge(index_row(1, ManagedJobStatus.CANCELLED, 4))
    assert _shown(carried) == {
        1: ManagedJobStatus.CANCELLED,
        2: ManagedJobStatus.SUCCEEDED,
        3: ManagedJobStatus.CANCELLING,
    }
    assert carried.carried_cancelling() == [3]
    assert [row.summary.status for row in carried.carried() if row.summary.job_id == 3] == [
        ManagedJobStatus.PENDING
    ], "the mark is shown, not stored in the row"
