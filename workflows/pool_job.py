"""A managed job's task on a pool's worker, inside its ``ManagedJobWorkflow`` (``jobs launch --pool``).

``PoolJob.run`` asks the pool for a worker (signal ``acquire`` to ``PoolWorkflow``) and waits,
durably, PENDING with the reason, until the pool signals ``worker_assigned``. It then queues the run
on that worker's cluster (``submit_job``, the cluster's own job queue: no provisioning, no setup;
the workdir is synced as ``exec`` does) with ``notify`` set to its workflow, so the cluster signals
``job_ended`` when the run ends, and gives the worker back (signal ``release``). A run that ended
because the worker's nodes were lost (the cluster says which node, the provider says the nodes are
gone, or the run was cancelled by someone else: the pool tears a lost worker down under its job)
gives the worker back as lost, and the task waits for another one (a recovery). Cancelled,
it cancels its run on the worker and gives the worker back (or leaves the line) first.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, FailureError

with workflow.unsafe.imports_passed_through():
    from skyhop.activities.clusters import ClusterActivities
    from skyhop.activities.models import CancelClusterJobInput, SubmitJobInput
    from skyhop.contract import SHORT_QUEUE, ErrorType, JobStatus
    from skyhop.contract.clusters import JobEnded, JobRecord, JobSubmission
    from skyhop.contract.job_index import ManagedJobStatus
    from skyhop.contract.managed_jobs import EndReason, JobEnd, ManagedJobRequest, ManagedTaskState
    from skyhop.contract.pools import PoolClaim, PoolRelease, PoolSignal, WorkerAssigned, pool_workflow_id
    from skyhop.storage.logs import job_stream
    from skyhop.workflows.options import SHORT_RETRY
    from skyhop.workflows.recovery import nodes_lost
    from skyhop.workflows.stages import node_statuses, raise_if_cancelled_by
    from skyhop.workflows.task_book import TaskBook

__all__ = ["PoolInbox", "PoolJob"]


class PoolInbox:
    """What the pool and the worker's cluster signalled the job (its workflow's handlers fill it)."""

    def __init__(self) -> None:
        self.assigned: WorkerAssigned | None = None
        self.ended: dict[tuple[str, int], JobEnded] = {}

    def worker_assigned(self, assigned: WorkerAssigned) -> None:
        self.assigned = assigned

    def job_ended(self, ended: JobEnded) -> None:
        self.ended[(ended.cluster_name, ended.job.job_id)] = ended


class _Lost(Exception):
    """The worker's nodes were lost under the run: wait for another worker."""


class PoolJob(TaskBook):
    """Task ``state.index`` of ``request`` (whose ``pool`` is set), run on the pool's workers."""

    def __init__(
        self,
        request: ManagedJobRequest,
        state: ManagedTaskState,
        changed: Callable[[], None],
        inbox: PoolInbox,
    ) -> None:
        super().__init__(state, changed)
        assert request.pool is not None
        self.request = request
        self.pool: str = request.pool
        self.task = request.tasks[state.index]
        self.inbox = inbox
        self._worker: WorkerAssigned | None = None
        self._job: JobRecord | None = None

    async def run(self) -> JobEnd:
        """Run the task to its end on a worker; the worker is given back by then, whatever ends it."""
        try:
            while True:
                try:
                    worker = await self._acquire()
                except _NoPool as missing:
                    self.state.waiting = None
                    return self._end_attempt_with(
                        ManagedJobStatus.FAILED_PRECHECKS, EndReason.PRECHECKS, str(missing), "no pool"
                    )
                try:
                    end = await self._use(worker)
                except _Lost as lost:
                    await self._give_back(str(lost))
                    self.state.recoveries += 1
                    continue
                await self._give_back()
                return end
        except asyncio.CancelledError:
            self._stop_clock()
            self._close_attempt("cancelled")
            self._set(ManagedJobStatus.CANCELLING)
            await self._stop_run()
            await self._give_back()
            raise

    async def _acquire(self) -> WorkerAssigned:
        state = self.state
        self._set(ManagedJobStatus.RECOVERING if state.attempts else ManagedJobStatus.PENDING)
        state.waiting = f"waiting for an idle worker of pool {self.pool}"
        self._changed()
        self.inbox.assigned = None
        claim = PoolClaim(job_workflow=workflow.info().workflow_id, job_id=self.request.job_id)
        try:
            await workflow.get_external_workflow_handle(pool_workflow_id(self.pool)).signal(
                PoolSignal.ACQUIRE, claim
            )
        except FailureError as exc:
            raise _NoPool(f"pool {self.pool!r} is not running (skyhop jobs pool status)") from exc
        await workflow.wait_condition(lambda: self.inbox.assigned is not None)
        assert self.inbox.assigned is not None
        self._worker = worker = self.inbox.assigned
        state.waiting = None
        return worker

    async def _use(self, worker: WorkerAssigned) -> JobEnd:
        """Queue the run on the worker's cluster and wait for its end."""
        state = self.state
        state.cluster_name = worker.cluster_name
        attempt = self._open_attempt()
        attempt.location = worker.handle.offering.location
        attempt.provider, attempt.region = worker.handle.offering.provider, worker.handle.offering.region
        self._set(ManagedJobStatus.STARTING)
        submission = JobSubmission(
            request_id=f"{workflow.info().workflow_id}/{state.index}/{attempt.number}",
            task=self.task,
            user=self.request.user,
            sync_workdir=self.task.workdir is not None or self.task.workdir_git is not None,
            notify=workflow.info().workflow_id,
        )
        try:
            self._job = job = await workflow.execute_activity_method(
                ClusterActivities.submit_job,
                SubmitJobInput(cluster_name=worker.cluster_name, submission=submission),
                task_queue=SHORT_QUEUE,
                start_to_close_timeout=timedelta(seconds=60),
                retry_policy=SHORT_RETRY,
                summary=f"run on {worker.cluster_name}",
            )
        except ActivityError as exc:
            raise_if_cancelled_by(exc)
            cause = exc.cause
            if await self._worker_lost():
                raise _Lost(f"worker {worker.worker_id} was lost before the run started") from exc
            if isinstance(cause, ApplicationError) and cause.type == ErrorType.SUBMIT_REJECTED:
                return self._end_attempt_with(
                    ManagedJobStatus.FAILED_PRECHECKS,
                    EndReason.PRECHECKS,
                    cause.message,
                    "refused by the worker",
                )
            raise
        attempt.log_stream = job_stream(job.task_id)
        state.running_since = workflow.now().timestamp()
        self._set(ManagedJobStatus.RUNNING)
        key = (worker.cluster_name, job.job_id)
        await workflow.wait_condition(lambda: key in self.inbox.ended)
        ended = self.inbox.ended.pop(key)
        self._job = None
        self._stop_clock()
        record = ended.job
        if record.status == JobStatus.SUCCEEDED:
            return self._end_attempt_with(
                ManagedJobStatus.SUCCEEDED, EndReason.SUCCEEDED, "succeeded", "succeeded", 0
            )
        # Cancelled, but not by this job (it would be in its cancellation): the worker was torn down
        # under it (the pool found its nodes gone) or taken by hand (skyhop down, cancel).
        if ended.lost_node is not None or record.status == JobStatus.CANCELLED or await self._worker_lost():
            self._close_attempt("its worker was lost")
            raise _Lost(f"{worker.cluster_name} was lost under the run ({record.error or record.status})")
        failure = (
            f"exited with code {record.exit_code}"
            if record.exit_code is not None
            else f"ended {record.status}"
        )
        detail = f" ({record.error})" if record.error else ""
        status = (
            ManagedJobStatus.FAILED_SETUP
            if record.status == JobStatus.FAILED_SETUP
            else ManagedJobStatus.FAILED
        )
        return self._end_attempt_with(
            status,
            EndReason.EXIT_CODE,
            f"the run {failure} on {worker.cluster_name}{detail}",
            failure,
            record.exit_code,
        )

    async def _worker_lost(self) -> bool:
        """Whether the provider says the worker's nodes are gone (not asked again if it cannot answer)."""
        assert self._worker is not None
        try:
            statuses = await node_statuses(self._worker.handle)
        except ActivityError as exc:
            raise_if_cancelled_by(exc)
            return False
        return statuses is not None and nodes_lost(statuses)

    async def _stop_run(self) -> None:
        """Cancel the run on the worker, if one is queued or running."""
        job, worker = self._job, self._worker
        if job is None or worker is None:
            return
        with contextlib.suppress(ActivityError):
            await workflow.execute_activity_method(
                ClusterActivities.cancel_cluster_job,
                CancelClusterJobInput(cluster_name=worker.cluster_name, job_id=job.job_id),
                task_queue=SHORT_QUEUE,
                start_to_close_timeout=timedelta(seconds=120),
                retry_policy=SHORT_RETRY,
            )

    async def _give_back(self, lost: str | None = None) -> None:
        """Give the worker back to the pool (or leave its line); a pool that is gone is not waited for."""
        worker, self._worker = self._worker, None
        release = PoolRelease(
            job_workflow=workflow.info().workflow_id,
            worker_id=worker.worker_id if worker is not None else None,
            lost=lost,
        )
        with contextlib.suppress(FailureError):
            await workflow.get_external_workflow_handle(pool_workflow_id(self.pool)).signal(
                PoolSignal.RELEASE, release
            )


class _NoPool(Exception):
    """The pool does not run: the job ends FAILED_PRECHECKS."""
