"""The cluster entity's plain parts — lock, job queue, lifecycle — without a Temporal server."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from skyhop.contract import ClusterStatus, ClusterUpdate, HolderKind, JobStatus, Operation
from skyhop.contract.clusters import ClaimGrant, ClusterRecord, JobSubmission, LockHolder, Release
from skyhop.providers.base import KubernetesAccess, NodeStatus
from skyhop.spec import Resources, Task
from skyhop.workflows import cluster_queue, scheduler
from skyhop.workflows.cluster_lifecycle import (
    RECONCILE_INTERVAL_S,
    apply_release,
    holder_lost,
    idle,
    next_deadline,
    reconcile,
    refusal,
    submit_refusal,
)
from skyhop.workflows.cluster_lock import Claimed, ClusterLock, Released
from skyhop.workflows.cluster_queue import KEEP_FINISHED_JOBS, JobQueue
from tests.cluster.fakes import up_record

NOW = datetime(2026, 1, 1, tzinfo=UTC)
A, B = LockHolder.launch("launch:a"), LockHolder.launch("launch:b")


# --- the lock ------------------------------------------------------------------------------------


def test_launches_get_the_lock_in_claim_order_and_a_repeated_claim_changes_nothing() -> None:
    record = ClusterRecord(name="c")
    lock = ClusterLock(record)
    assert lock.claim(A) == Claimed.QUEUED and lock.claim(B) == Claimed.QUEUED
    assert lock.claim(A) == Claimed.ALREADY_QUEUED
    assert lock.grantable and lock.grant_next() == A and record.holder == A
    assert lock.claim(A) == Claimed.HOLDS  # the holder claiming again is sent its grant again
    assert not lock.grantable
    assert lock.release(A) == Released.LOCK and lock.grant_next() == B


def test_a_waiting_launch_that_gives_up_leaves_the_queue_and_strangers_change_nothing() -> None:
    record = ClusterRecord(name="c", holder=A, waiting=[B])
    lock = ClusterLock(record)
    assert lock.release(B) == Released.PLACE and record.waiting == [] and record.holder == A
    assert lock.release(LockHolder.launch("launch:nobody")) == Released.NOTHING


def test_operations_go_before_waiting_launches() -> None:
    record = ClusterRecord(name="c", holder=A, waiting=[B])
    lock = ClusterLock(record)
    lock.want()
    lock.release(A)
    assert lock.free and not lock.grantable  # the operation is served first
    lock.take(Operation.DOWN)
    assert lock.operation == Operation.DOWN and lock.launches() == [B]
    lock.unlock()
    assert lock.grantable


def test_clusters_from_before_keep_granting_in_the_old_order() -> None:
    lock = ClusterLock(ClusterRecord(name="c", waiting=[B]), operations_first=False)
    lock.want()
    assert lock.grantable


def test_down_cancels_the_holding_launch_first_then_the_waiting_ones() -> None:
    lock = ClusterLock(ClusterRecord(name="c", holder=A, waiting=[B]))
    assert lock.launches() == [A, B]
    operation = ClusterLock(ClusterRecord(name="c", holder=LockHolder.operation(Operation.STOP), waiting=[B]))
    assert operation.launches() == [B] and operation.busy


def test_holders_recorded_as_bare_strings_by_older_runs_are_read_typed() -> None:
    record = ClusterRecord.model_validate({"name": "c", "holder": "autostop", "waiting": ["launch:a"]})
    assert record.holder == LockHolder(kind=HolderKind.OPERATION, id="autostop")
    assert record.waiting == [A]
    assert ClusterRecord.model_validate({"name": "c", "holder": "launch:b"}).holder == B


def test_the_grant_is_small_and_grants_recorded_with_the_whole_record_still_read() -> None:
    assert set(ClaimGrant.model_fields) == {"status", "handle", "provision_request", "ever_up", "closed"}
    legacy = {"record": up_record("c").model_dump(mode="json"), "closed": False}
    grant = ClaimGrant.model_validate(legacy)
    assert grant.status == ClusterStatus.UP and grant.ever_up and grant.handle is not None


# --- the job queue ---------------------------------------------------------------------------------


def _submission(i: int, cpus: str = "1") -> JobSubmission:
    return JobSubmission(request_id=f"r{i}", task=Task(run="true", resources=Resources(cpus=cpus)))


def test_submit_numbers_jobs_and_indexes_them_by_request() -> None:
    record = up_record("c", cpus=2)
    queue = JobQueue(record, {})
    first = queue.submit(_submission(0), NOW)
    second = queue.submit(_submission(1), NOW)
    assert (first.job_id, second.job_id, record.next_job_id) == (1, 2, 3)
    assert queue.by_request("r1") is second and record.jobs == [first, second]
    assert first.task_id == "skyhop-2026-01-01-00-00-00-000000_c_1"
    assert queue.active and queue.has_pending


def test_to_start_is_the_tested_scheduler_fifo_with_head_of_line_blocking(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    record = up_record("c", cpus=2)
    queue = JobQueue(record, {})
    jobs = [queue.submit(_submission(i, cpus), NOW) for i, cpus in enumerate(["1", "2", "1"])]
    calls: list[int] = []

    def spy(*args: object) -> list[list[scheduler.NodeAllocation]]:
        calls.append(1)
        return scheduler.schedule(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(cluster_queue, "schedule", spy)
    assert record.handle is not None
    started = queue.to_start(record.handle)
    assert calls == [1]  # production placement is ``scheduler.schedule``, not a copy of it
    assert [job for job, _ in started] == [jobs[0]]  # job 3 fits, but job 2 blocks it
    assert jobs[0].status == JobStatus.SETTING_UP and jobs[0].placement[0].cpus == 1
    queue.mark(jobs[0], JobStatus.SUCCEEDED)
    assert [job.job_id for job, _ in queue.to_start(record.handle)] == [2]


def test_a_job_being_stopped_keeps_its_resources_until_it_has_stopped() -> None:
    record = up_record("c", cpus=1)
    queue = JobQueue(record, {})
    first, second = queue.submit(_submission(0), NOW), queue.submit(_submission(1), NOW)
    assert record.handle is not None
    queue.to_start(record.handle)
    queue.mark(first, JobStatus.CANCELLED)
    queue.stopping(first)
    assert queue.to_start(record.handle) == []
    queue.stopped(first)
    assert [job for job, _ in queue.to_start(record.handle)] == [second]


def test_an_ended_job_drops_its_submission_so_only_active_ones_are_carried() -> None:
    record = up_record("c")
    queue = JobQueue(record, {})
    job = queue.submit(_submission(0), NOW)
    queue.submit(_submission(1), NOW)
    queue.mark(job, JobStatus.FAILED)
    assert set(queue.submissions) == {2}
    rebuilt = JobQueue(record, queue.submissions)  # the next run, after a continue-as-new
    assert rebuilt.by_request("r0") is job and rebuilt.has_pending and not rebuilt.started()


def test_limits_refuse_a_queue_that_is_full(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cluster_queue, "MAX_ACTIVE_JOBS", 2)
    queue = JobQueue(up_record("c"), {})
    queue.submit(_submission(0), NOW)
    assert queue.too_much(_submission(1)) is None
    queue.submit(_submission(1), NOW)
    reason = queue.too_much(_submission(2))
    assert reason is not None and "already has 2 queued or running jobs" in reason
    monkeypatch.setattr(cluster_queue, "MAX_QUEUED_BYTES", 1000)
    big = JobSubmission(request_id="big", task=Task(run="x" * 1000))
    assert "kB of task definitions" in (JobQueue(up_record("d"), {}).too_much(big) or "")


def test_trim_keeps_the_newest_ended_jobs_and_forgets_their_requests() -> None:
    record = up_record("c")
    queue = JobQueue(record, {})
    jobs = [queue.submit(_submission(i), NOW) for i in range(KEEP_FINISHED_JOBS + 102)]
    for job in jobs[:-1]:
        queue.mark(job, JobStatus.SUCCEEDED)
    queue.trim_if_long()
    assert len(record.jobs) == KEEP_FINISHED_JOBS + 1 and record.jobs[-1] is jobs[-1]
    assert queue.by_request("r0") is None and queue.by_request("r101") is jobs[101]


# --- lifecycle -----------------------------------------------------------------------------------


def test_which_updates_each_status_allows() -> None:
    record = up_record("c")
    assert all(refusal(record, update) is None for update in ClusterUpdate if update in _GATED)
    record.status = ClusterStatus.INIT
    assert refusal(record, ClusterUpdate.STOP) == (
        "cluster c is INIT; only a cluster that is UP or STOPPED can be stopped"
    )
    assert refusal(record, ClusterUpdate.SET_AUTOSTOP) is None
    record.status = ClusterStatus.STOPPED
    assert "can be given autostop" in (refusal(record, ClusterUpdate.SET_AUTOSTOP) or "")


_GATED = (ClusterUpdate.STOP, ClusterUpdate.START, ClusterUpdate.SET_AUTOSTOP)


def test_a_cluster_of_pods_cannot_be_stopped_only_taken_down() -> None:
    record = up_record("c")
    assert record.handle is not None
    pod = KubernetesAccess(context="fake", namespace="default", pod="c-0")
    nodes = [node.model_copy(update={"access": pod}) for node in record.handle.nodes]
    record.handle = record.handle.model_copy(update={"nodes": nodes})
    assert refusal(record, ClusterUpdate.STOP) == (
        "cluster c runs on Kubernetes pods, which cannot be stopped: skyhop down c"
    )
    assert refusal(record, ClusterUpdate.SET_AUTOSTOP) is None  # autostop --down stays possible


def test_a_job_is_refused_while_an_operation_holds_the_cluster_or_it_is_not_up() -> None:
    record, task = up_record("c"), Task(run="true")
    assert submit_refusal(record, task, None) is None
    assert submit_refusal(record, task, Operation.STOP) == "cluster c is being stopped"
    assert submit_refusal(record, Task(), None) == "the task has no 'run' command"
    record.status = ClusterStatus.STOPPED
    assert submit_refusal(record, task, None) == "cluster c is STOPPED, not UP; start it with: skyhop start c"


def test_a_release_records_the_cluster_a_launch_brought_up_or_ends_one_that_never_came_up() -> None:
    fresh = ClusterRecord(name="c")
    up = up_record("c")
    apply_release(fresh, Release(launch_id="l", handle=up.handle, idle_minutes=5), now=100.0)
    assert fresh.status == ClusterStatus.UP and fresh.ever_up and fresh.launched_at == 100.0
    assert fresh.idle_minutes == 5
    failed = ClusterRecord(name="d")
    apply_release(failed, Release(launch_id="l", failed=True), now=100.0)
    assert failed.status == ClusterStatus.TERMINATED


def test_a_dead_holder_ends_a_cluster_it_never_brought_up_and_marks_one_it_reused() -> None:
    fresh = ClusterRecord(name="c")
    holder_lost(fresh, "launch:a")
    assert fresh.status == ClusterStatus.TERMINATED
    reused = up_record("c")
    holder_lost(reused, "launch:a")
    assert reused.status == ClusterStatus.UP
    assert reused.degraded is not None and "launch launch:a ended without finishing" in reused.degraded


def test_reconcile_reads_the_nodes_real_statuses() -> None:
    record = up_record("c")
    assert reconcile(record, [NodeStatus.UP]).status == ClusterStatus.UP
    gone = reconcile(record, [NodeStatus.TERMINATED])
    assert gone.status == ClusterStatus.TERMINATED and gone.bad == {0: NodeStatus.TERMINATED}
    assert gone.reason == "node 0 is TERMINATED (changed outside skyhop)"
    record.status = ClusterStatus.STOPPED
    assert reconcile(record, [NodeStatus.STOPPED]).status is None


def test_idle_and_the_next_deadline() -> None:
    record = up_record("c", idle_minutes=10)
    assert idle(record, lock_busy=False, jobs_active=False)
    assert not idle(record, lock_busy=True, jobs_active=False)
    record.idle_since, record.refreshed_at = 1000.0, 0.0
    assert next_deadline(record, is_idle=True, lock_free=True) == 1000.0 + 600
    record.refreshed_at = 0.0 - RECONCILE_INTERVAL_S  # the reconcile is due first
    assert next_deadline(record, is_idle=True, lock_free=True) == 0.0
    assert next_deadline(record, is_idle=False, lock_free=False) is None
