"""``ClusterWorkflow``: one entity workflow per cluster (id ``cluster:<name>``).

It replaces SkyPilot's per-cluster lock, cluster table, job table and skylet: every change to the
cluster goes through it, one at a time. The decisions are plain, unit-tested parts; this class
wires them to Temporal (signals, updates, activities, timers, continue-as-new):

- ``workflows.cluster_lock.ClusterLock``: launches claim the lock (``claim``, sent with the
  cluster's start), get ``claim_granted`` in turn and give it back with ``release``; a launch
  that was terminated or timed out has its lease (``workflows.lock_lease``) give it back.
  stop/start/down/autostop hold the lock too, before any waiting launch; ``down`` cancels every
  launch holding or waiting for the cluster.
- ``workflows.cluster_queue.JobQueue``: ``submit_job`` (an update) queues a job; the scheduler
  (``workflows.scheduler.schedule``: FIFO with head-of-line blocking) starts queued jobs as soon as
  their demand fits what is free. A started job is a ``start_job`` activity (SETTING_UP), then
  RUNNING until the cluster's job watcher (``workflows.job_watch``: one activity for all the
  cluster's jobs) reports its end. A job submitted with ``notify`` has its end signalled to that
  workflow (``JobEnded``).
- ``workflows.cluster_lifecycle``: which updates a status allows, what a release or the
  provider's answer makes of the record, when the cluster is idle and must next wake up.
- One durable timer covers the nearest deadline: autostop (idle long enough) or the periodic
  reconcile with the provider. It is re-armed only when that deadline moves, and being a server
  timer it fires even when no worker was up at the time (the worker acts when it comes back).
- The history stays bounded by continuing as new; everything is in ``ClusterInput``. Jobs survive
  it: the new run follows the running jobs with a watcher of its own, and the old run's abandoned
  activities leave the jobs alone (only an explicit cancel stops a job).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, FailureError

with workflow.unsafe.imports_passed_through():
    from skyhop.activities import cluster_ops, jobs, provisioning
    from skyhop.activities.cluster_ops import CancelJobsInput, StartClusterInput, StopResult
    from skyhop.activities.models import RunJobInput, WaitJobInput
    from skyhop.contract import (
        CLUSTER_WORKFLOW,
        LONG_QUEUE,
        SHORT_QUEUE,
        ClusterStatus,
        ClusterUpdate,
        ErrorType,
        JobStatus,
        LockSignal,
        Operation,
    )
    from skyhop.contract.clusters import (
        AutostopRequest,
        CancelRequest,
        CancelResult,
        ClaimGrant,
        ClaimRequest,
        ClusterInput,
        ClusterRecord,
        JobEnded,
        JobRecord,
        JobSubmission,
        LockHolder,
        Release,
        StartRequest,
    )
    from skyhop.contract.failures import innermost_message
    from skyhop.contract.search import STATUS
    from skyhop.providers.base import ClusterHandle
    from skyhop.providers.runtime.jobs import JobOutcome
    from skyhop.spec import Task
    from skyhop.storage.plan import cluster_storage, storage_plan
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
    from skyhop.workflows.cluster_queue import KEEP_FINISHED_JOBS, MAX_ACTIVE_JOBS, MAX_QUEUED_BYTES, JobQueue
    from skyhop.workflows.job_watch import JOB_EVENTS_PATCH, JobWatcher, notify_ended
    from skyhop.workflows.options import HEARTBEAT, LONG_RETRY, SHORT_RETRY, USER_ERRORS, queue_for
    from skyhop.workflows.stages import (
        attach_buckets,
        delete_created_buckets,
        history_is_long,
        node_statuses,
        prepare_nodes,
        release_buckets,
        run_long,
    )

__all__ = [
    "KEEP_FINISHED_JOBS",
    "MAX_ACTIVE_JOBS",
    "MAX_QUEUED_BYTES",
    "RECONCILE_INTERVAL_S",
    "ClusterWorkflow",
]

_LONG_TIMEOUT = timedelta(hours=2)
"""Longest one start, sync, setup or teardown step may take."""

_ASK_WHY_RUNNER_LOST = "reconcile-when-a-job-runner-is-lost"
"""Patch id: a job whose runner vanished asks the provider whether its node is gone (see ``_run_job``)."""
_LOCK_LIVENESS = "lock-liveness-and-down-first"
"""Patch id, checked once as a run begins: the run re-grants a holder that claims again, ends a
cluster never brought up whose holder is gone, lets operations go before waiting launches, and its
``down`` cancels waiting launches too. Runs that began before it keep the old behaviour, so that
their histories replay."""
_START_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=5,
    non_retryable_error_types=USER_ERRORS,
)


@workflow.defn(name=CLUSTER_WORKFLOW)
class ClusterWorkflow:
    @workflow.init
    def __init__(self, input: ClusterInput) -> None:
        self.record = input.record
        self.queue = JobQueue(self.record, input.submissions)
        self.lock = ClusterLock(self.record)
        self._setup_task = input.setup_task
        self._storage = input.storage
        if "storage" not in input.model_fields_set and input.setup_task is not None:
            # A cluster from before ``ClusterInput.storage``: its last launch's is all it knows of.
            self._storage = cluster_storage(storage_plan(input.setup_task.file_mounts))
        self._history_limit = input.history_limit
        self._runs: dict[int, asyncio.Task[None]] = {}
        self._liveness = False
        """Whether this run has the rules of ``_LOCK_LIVENESS`` (decided as the run begins)."""
        self._published: ClusterStatus | None = None
        self._watcher = JobWatcher()
        self._notifying: set[asyncio.Task[None]] = set()

    @workflow.run
    async def run(self, input: ClusterInput) -> ClusterRecord:
        self._liveness = workflow.patched(_LOCK_LIVENESS)
        self.lock.operations_first = self._liveness
        self._resume_jobs()
        self._changed()
        while True:
            armed = self._next_deadline()
            if armed is not None and armed <= workflow.now().timestamp():
                await self._on_deadline()
                continue
            try:
                await workflow.wait_condition(
                    lambda armed=armed: (  # type: ignore[misc]
                        self.lock.grantable
                        or self._closed()
                        or history_is_long(self._history_limit)
                        or self._next_deadline() != armed
                    ),
                    timeout=None if armed is None else timedelta(seconds=armed - workflow.now().timestamp()),
                )
            except TimeoutError:
                continue
            if self._closed():
                break
            if self.lock.grantable:
                await self._grant_next()
            elif history_is_long(self._history_limit):
                await workflow.wait_condition(self._settled)
                workflow.continue_as_new(self._carried())
        await self._refuse_waiting()
        await workflow.wait_condition(self._settled)
        return self.record

    def _settled(self) -> bool:
        """Whether the run may end: no handler running, and every job end told to its ``notify``
        workflow (a run that ended first would drop the signal: a pool job whose worker was taken
        down would wait for ever)."""
        return workflow.all_handlers_finished() and not self._notifying

    # --- queries, signals and updates -------------------------------------------------------------

    @workflow.query
    def status(self) -> ClusterRecord:
        """The cluster's record: status, handle, autostop and jobs."""
        return self.record

    @workflow.signal(name=LockSignal.CLAIM.value)
    def claim(self, request: ClaimRequest) -> None:
        """A launch asks for the lock; it will get ``claim_granted`` in turn."""
        launch = LockHolder.launch(request.launch_id)
        claimed = self.lock.claim(launch)
        if claimed == Claimed.QUEUED:
            self._changed()
        elif claimed == Claimed.HOLDS and self._liveness:
            # A retried claim, or a launch reset to before its grant: it waits for the grant again.
            asyncio.create_task(self._send_grant(launch))

    @workflow.signal(name=LockSignal.RELEASE.value)
    def release(self, release: Release) -> None:
        """The holder gives the lock back, with the cluster it provisioned, if any; a waiting launch
        that gives up (it was cancelled) leaves the queue. Sent by a launch's lease (``abandoned``),
        it frees what a launch that ended without releasing held."""
        launch = LockHolder.launch(release.launch_id)
        released = self.lock.release(launch)
        if released == Released.NOTHING:
            return
        if released == Released.LOCK and release.abandoned:
            holder_lost(self.record, launch.id)
            workflow.logger.warning("launch %s ended holding cluster %s", launch.id, self.record.name)
        elif released == Released.LOCK:
            apply_release(self.record, release, workflow.now().timestamp())
            self._storage = self._storage.merged(release.storage)
            if release.task is not None and not release.failed:
                self._setup_task = release.task
        self._changed()

    @workflow.update(name=ClusterUpdate.SUBMIT_JOB.value)
    def submit_job(self, submission: JobSubmission) -> JobRecord:
        """Queue a job; a repeated ``request_id`` returns the job it created the first time."""
        existing = self.queue.by_request(submission.request_id)
        if existing is not None:
            return existing
        job = self.queue.submit(submission, workflow.now())
        self._changed()
        return job

    @submit_job.validator
    def _validate_submit(self, submission: JobSubmission) -> None:
        if self.queue.by_request(submission.request_id) is not None:
            return
        reason = submit_refusal(self.record, submission.task, self.lock.operation)
        reason = reason or self.queue.too_much(submission)
        if reason is not None:
            raise ApplicationError(reason, type=ErrorType.SUBMIT_REJECTED)

    @workflow.update(name=ClusterUpdate.CANCEL.value)
    async def cancel(self, request: CancelRequest) -> CancelResult:
        """Cancel queued jobs at once and stop running ones on every node they run on."""
        by_id = {job.job_id: job for job in self.record.jobs}
        wanted = [job.job_id for job in self.record.active_jobs] if request.all else request.job_ids
        result = CancelResult(
            unknown=[i for i in wanted if i not in by_id],
            already_done=[i for i in wanted if i in by_id and by_id[i].status.done],
        )
        targets = [by_id[i] for i in wanted if i in by_id and not by_id[i].status.done]
        result.cancelled = [job.job_id for job in targets]
        await self._end_jobs(targets, JobStatus.CANCELLED, None, kill=True)
        return result

    @workflow.update(name=ClusterUpdate.STOP.value)
    async def stop(self) -> ClusterRecord:
        """Stop the nodes (disks kept); queued and running jobs are cancelled."""

        async def stop() -> None:
            self._require(ClusterUpdate.STOP)
            await self._stop()

        return await self._locked(Operation.STOP, stop)

    @stop.validator
    def _validate_stop(self) -> None:
        self._require(ClusterUpdate.STOP)

    @workflow.update(name=ClusterUpdate.START.value)
    async def start(self, request: StartRequest) -> ClusterRecord:
        """Start a STOPPED cluster: its nodes again, or new ones in the same zone where none were kept.

        Autostop is what ``request`` says (none unless it sets ``idle_minutes``).
        """

        async def start() -> None:
            self._require(ClusterUpdate.START)
            await self._start()
            # As in SkyPilot, a start without -i leaves the cluster without autostop.
            self._set_autostop(AutostopRequest(idle_minutes=request.idle_minutes, down=request.down))

        return await self._locked(Operation.START, start)

    @start.validator
    def _validate_start(self, request: StartRequest) -> None:
        self._require(ClusterUpdate.START)

    @workflow.update(name=ClusterUpdate.DOWN.value)
    async def down(self) -> ClusterRecord:
        """Tear the cluster down and end the workflow; launches holding or waiting for the cluster
        are cancelled first.

        A cancelled launch's compensation removes what it created and gives the lock (or its place
        in the queue) back, so ``down`` always ends, even behind a launch that is stuck or
        searching for capacity; the lease of a launch that ended without giving the lock back
        gives it back (``workflows.lock_lease``).
        """
        if self.record.status == ClusterStatus.TERMINATED:
            return self.record
        await self._cancel_launches()
        return await self._locked(Operation.DOWN, self._down)

    async def _cancel_launches(self) -> None:
        launches = self.lock.launches()
        if not self._liveness:  # a run that began before: only the holder, as it always did
            launches = launches[:1] if launches and launches[0] == self.lock.holder else []
        for launch in launches:
            try:
                await workflow.get_external_workflow_handle(launch.id).cancel()
            except FailureError:
                # The launch is gone without giving the lock back (terminated): nobody holds it.
                if self.lock.release(launch) != Released.NOTHING:
                    self._changed()

    @workflow.update(name=ClusterUpdate.SET_AUTOSTOP.value)
    def set_autostop(self, request: AutostopRequest) -> ClusterRecord:
        """Set (or with ``idle_minutes=None`` cancel) autostop; the idle clock restarts now."""
        self._set_autostop(request)
        self._changed()
        return self.record

    @set_autostop.validator
    def _validate_autostop(self, request: AutostopRequest) -> None:
        self._require(ClusterUpdate.SET_AUTOSTOP)

    @workflow.update(name=ClusterUpdate.REFRESH.value)
    async def refresh(self) -> ClusterRecord:
        """Ask the provider for the nodes' real state and reconcile the record with it."""
        await self._reconcile()
        return self.record

    # --- jobs --------------------------------------------------------------------------------------

    def _mark(self, job: JobRecord, status: JobStatus) -> None:
        self.queue.mark(job, status)

    def _schedule(self) -> None:
        """Start every queued job that fits now, in order, stopping at the first that does not."""
        record = self.record
        if record.status != ClusterStatus.UP or record.handle is None or self.lock.operation is not None:
            return
        for job, _ in self.queue.to_start(record.handle):
            self._runs[job.job_id] = asyncio.create_task(self._run_job(job, record.handle))

    def _resume_jobs(self) -> None:
        """After a continue-as-new: re-attach to the jobs the previous run had started."""
        handle = self.record.handle
        for job in self.queue.started():
            resumable = job.job_id in self.queue.submissions
            if resumable and handle is not None and job.job_id not in self._runs:
                self._runs[job.job_id] = asyncio.create_task(self._run_job(job, handle))

    async def _run_job(self, job: JobRecord, handle: ClusterHandle) -> None:
        submission = self.queue.submission(job)
        # Clusters started before the watcher keep one ``wait_job`` per job until they continue as new.
        watched = workflow.patched(JOB_EVENTS_PATCH)
        if watched:
            self._watcher.follow(job, handle)
        ended_here, lost_node = False, None
        try:
            if job.status == JobStatus.SETTING_UP:
                await workflow.execute_activity(
                    jobs.start_job,
                    RunJobInput(
                        handle=handle,
                        job=job,
                        task=submission.task,
                        sync_workdir=submission.sync_workdir,
                        flush_cached_mounts=self._storage.cached,
                    ),
                    task_queue=queue_for(LONG_QUEUE, handle),
                    start_to_close_timeout=timedelta(hours=2),
                    heartbeat_timeout=HEARTBEAT,
                    retry_policy=_START_RETRY,
                    summary=f"start job {job.job_id}",
                )
                self._mark(job, JobStatus.RUNNING)
                job.started_at = workflow.now().timestamp()
                self._watcher.started(job.job_id)
            if watched:
                outcome = await self._watcher.end_of(job.job_id)
            else:
                outcome = await workflow.execute_activity(
                    jobs.wait_job,
                    WaitJobInput(handle=handle, job=job),
                    task_queue=queue_for(LONG_QUEUE, handle),
                    start_to_close_timeout=timedelta(days=365),
                    heartbeat_timeout=HEARTBEAT,
                    retry_policy=LONG_RETRY,
                    summary=f"job {job.job_id}",
                )
            # A job cancelled on its node while the workflow did not cancel it was killed from
            # outside (a node being removed stops its jobs first): as telling as a lost runner.
            killed = watched and outcome.status == JobStatus.CANCELLED.value
            if (
                not job.status.done
                and (_runner_lost(outcome) or killed)
                and workflow.patched(_ASK_WHY_RUNNER_LOST)
            ):
                # The runner vanished without seeing the job end: the node may have been removed
                # (its processes die first). Ask the provider, so the job names the node's fate
                # whether this watcher or a ``status --refresh`` notices first.
                self._runs.pop(job.job_id, None)  # reconciling must not cancel this very task
                with contextlib.suppress(ActivityError):
                    await self._reconcile()
            if not job.status.done:
                self._mark(job, JobStatus(outcome.status))
                job.exit_code = outcome.exit_code
                job.failed_rank = outcome.failed_rank
                job.error = outcome.error
                ended_here = True
            if outcome.lost_rank is not None and outcome.lost_rank < len(job.placement):
                lost_node = job.placement[outcome.lost_rank].node
                self.record.degraded = f"node {lost_node} stopped answering (while job {job.job_id} ran)"
        except asyncio.CancelledError:
            if not job.status.done:
                self._mark(job, JobStatus.CANCELLED)
                ended_here = True
            if watched and not self.queue.is_stopping(job):
                # Ended by the workflow without a kill (stop, down, a vanished node): no ``wait_job``
                # is cancelled to stop the job on its other nodes, so stop it here.
                self._watcher.forget(job.job_id)
                with contextlib.suppress(ActivityError):
                    await self._stop_processes([job])
        except ActivityError as exc:
            if not job.status.done:
                ended_here = True
                self._mark(
                    job, JobStatus.FAILED if job.status == JobStatus.RUNNING else JobStatus.FAILED_SETUP
                )
                job.error = innermost_message(exc)
            if isinstance(exc.cause, ApplicationError) and exc.cause.type == ErrorType.NODE_LOST:
                self.record.degraded = f"{innermost_message(exc)} (while starting job {job.job_id})"
        # Not in a ``finally``: when a worker evicts the workflow, this coroutine is closed and
        # must not touch workflow state.
        job.ended_at = job.ended_at or workflow.now().timestamp()
        self._runs.pop(job.job_id, None)
        self._watcher.forget(job.job_id)
        if ended_here:
            self._tell_ended(submission.notify, job, lost_node)
        self._changed()

    def _tell_ended(self, notify: str | None, job: JobRecord, lost_node: int | None = None) -> None:
        """Signal the job's end to the workflow its submission names, if any (once per job)."""
        if notify is not None:
            ended = JobEnded(cluster_name=self.record.name, job=job.model_copy(), lost_node=lost_node)
            task = asyncio.create_task(notify_ended(notify, ended))
            self._notifying.add(task)
            task.add_done_callback(self._notifying.discard)

    async def _end_jobs(
        self,
        targets: list[JobRecord],
        status: JobStatus,
        reason: str | None,
        kill: bool,
        lost_nodes: frozenset[int] = frozenset(),
    ) -> None:
        """Mark active jobs ended; with ``kill``, stop their processes before their resources are free.

        ``lost_nodes`` are the cluster nodes that are gone, told to a job's ``notify`` workflow.
        """
        now = workflow.now().timestamp()
        started = [job for job in targets if job.placement]
        for job in targets:
            notify = self.queue.notify_of(job)
            self._mark(job, status)
            job.error, job.ended_at = reason, now
            lost = [a.node for a in job.placement if a.node in lost_nodes]
            self._tell_ended(notify, job, lost[0] if lost else None)
            run = self._runs.pop(job.job_id, None)
            if run is not None:
                run.cancel()
            if kill and job.placement:
                self.queue.stopping(job)
        failure: ActivityError | None = None
        if kill and started:
            try:
                await self._stop_processes(started)
            except ActivityError as exc:
                failure = exc
            for job in started:
                self.queue.stopped(job)
        self._changed()
        if failure is not None:
            raise failure

    async def _stop_processes(self, started: list[JobRecord]) -> None:
        """Stop the jobs' processes on every node they were placed on."""
        if self.record.handle is not None:
            await workflow.execute_activity(
                cluster_ops.cancel_jobs,
                CancelJobsInput(handle=self.record.handle, jobs=started),
                task_queue=queue_for(SHORT_QUEUE, self.record.handle),
                start_to_close_timeout=timedelta(seconds=60),
                retry_policy=SHORT_RETRY,
            )

    # --- stop, start, down, autostop -----------------------------------------------------------------

    async def _locked(self, operation: Operation, work: Callable[[], Awaitable[None]]) -> ClusterRecord:
        """Run a lifecycle operation holding the cluster's lock, as a launch does; the record after it."""
        self.lock.want()
        try:
            await workflow.wait_condition(lambda: self.lock.free)
        except asyncio.CancelledError:
            self.lock.give_up()
            raise
        self.lock.take(operation)
        try:
            await work()
        except (FailureError, asyncio.CancelledError):
            self._unlock()
            raise
        self._unlock()  # not in a ``finally``: see ``_run_job``
        return self.record

    def _unlock(self) -> None:
        self.lock.unlock()
        self._changed()

    def _require(self, update: ClusterUpdate) -> None:
        reason = refusal(self.record, update)
        if reason is not None:
            raise ApplicationError(reason, type=ErrorType.CLUSTER_STATE)

    async def _stop(self) -> None:
        record = self.record
        if record.status != ClusterStatus.UP or record.handle is None:
            return
        await self._end_jobs(record.active_jobs, JobStatus.CANCELLED, "the cluster was stopped", kill=False)
        await release_buckets(record.handle, self._storage, timeout=_LONG_TIMEOUT)
        result: StopResult = await workflow.execute_activity(
            cluster_ops.stop_cluster,
            record.handle,
            task_queue=queue_for(LONG_QUEUE, record.handle),
            start_to_close_timeout=timedelta(minutes=30),
            heartbeat_timeout=timedelta(minutes=5),
            retry_policy=LONG_RETRY,
        )
        record.status = ClusterStatus.STOPPED
        record.stop_kept_nodes = result.kept_nodes

    async def _start(self) -> None:
        record = self.record
        if record.status != ClusterStatus.STOPPED or record.handle is None:
            return
        recreate = not record.stop_kept_nodes
        record.status = ClusterStatus.INIT
        self._publish()
        try:
            handle: ClusterHandle = await self._long(
                cluster_ops.start_cluster,
                StartClusterInput(handle=record.handle, recreate=recreate, request=record.provision_request),
            )
            if recreate and self._setup_task is not None:
                await self._set_up(handle, self._setup_task)
            elif self._setup_task is not None:
                mounts = storage_plan(self._setup_task.file_mounts)
                await attach_buckets(handle, mounts, timeout=_LONG_TIMEOUT)
        except (FailureError, asyncio.CancelledError):
            record.status = ClusterStatus.STOPPED if not recreate else ClusterStatus.INIT
            raise
        record.handle = handle
        record.status = ClusterStatus.UP
        record.degraded = None
        record.stop_kept_nodes = True
        record.refreshed_at = workflow.now().timestamp()

    async def _set_up(self, handle: ClusterHandle, task: Task) -> None:
        """New nodes get what a launch gave the old ones: workdir, file mounts, setup."""
        key = f"setup-start-{workflow.uuid4().hex[:12]}" if task.needs_setup else ""
        await prepare_nodes(handle, task, key, mounts=storage_plan(task.file_mounts), timeout=_LONG_TIMEOUT)

    async def _down(self) -> None:
        record = self.record
        await self._end_jobs(
            record.active_jobs, JobStatus.CANCELLED, "the cluster was taken down", kill=False
        )
        if record.handle is not None:
            await release_buckets(record.handle, self._storage, timeout=_LONG_TIMEOUT)
            await self._long(provisioning.terminate, record.handle)
        record.status = ClusterStatus.TERMINATED
        await delete_created_buckets(record.name, self._storage, timeout=_LONG_TIMEOUT)

    def _set_autostop(self, request: AutostopRequest) -> None:
        self.record.idle_minutes = request.idle_minutes
        self.record.autostop_down = request.down and request.idle_minutes is not None
        self.record.idle_since = workflow.now().timestamp() if self._idle() else None

    async def _autostop(self) -> None:
        await self._locked(Operation.AUTOSTOP, self._down if self.record.autostop_down else self._stop)

    # --- reconciling with the provider ------------------------------------------------------------

    async def _reconcile(self) -> None:
        """Make the record agree with the provider: vanished nodes fail their jobs and the cluster."""
        record = self.record
        record.refreshed_at = workflow.now().timestamp()
        if record.handle is None or not self.lock.free or record.status == ClusterStatus.TERMINATED:
            return
        handle = record.handle
        statuses = await node_statuses(handle, SHORT_RETRY)
        if statuses is None or not self.lock.free or record.handle != handle:
            return
        verdict = reconcile(record, statuses)
        if not verdict.bad:
            if verdict.status is not None:
                record.status = verdict.status
                self._changed()
            return
        hit = [
            job
            for job in record.active_jobs
            if not job.placement or any(a.node in verdict.bad for a in job.placement)
        ]
        await self._end_jobs(
            hit, JobStatus.FAILED, verdict.reason, kill=False, lost_nodes=frozenset(verdict.bad)
        )
        if verdict.status is not None:
            record.status = verdict.status
        record.degraded = verdict.reason
        self._changed()

    # --- the main loop's deadlines -------------------------------------------------------------------

    def _next_deadline(self) -> float | None:
        return next_deadline(self.record, is_idle=self._idle(), lock_free=self.lock.free)

    async def _on_deadline(self) -> None:
        now = workflow.now().timestamp()
        autostop_at = self.record.autostop_at
        if self._idle() and autostop_at is not None and autostop_at <= now:
            try:
                await self._autostop()
            except ActivityError as exc:
                workflow.logger.warning("autostop of %s failed: %s", self.record.name, innermost_message(exc))
                self.record.idle_since = now  # try again after another idle interval
            return
        try:
            await self._reconcile()
        except ActivityError:
            workflow.logger.warning("reconciling cluster %s with its provider failed", self.record.name)

    def _idle(self) -> bool:
        return idle(self.record, lock_busy=self.lock.busy, jobs_active=self.queue.active)

    def _changed(self) -> None:
        """After any change: start what fits, keep the idle clock, trim old jobs, publish the status."""
        self._schedule()
        if not self._idle():
            self.record.idle_since = None
        elif self.record.idle_since is None:
            self.record.idle_since = workflow.now().timestamp()
        self.queue.trim_if_long()
        self._publish()

    # --- the lock and continue-as-new -------------------------------------------------------------------

    def _closed(self) -> bool:
        return self.record.status == ClusterStatus.TERMINATED and self.lock.free

    def _carried(self) -> ClusterInput:
        self.queue.trim()
        return ClusterInput(
            record=self.record,
            submissions=self.queue.submissions,
            setup_task=self._setup_task,
            history_limit=self._history_limit,
            storage=self._storage,
        )

    def _grant(self, *, closed: bool = False) -> ClaimGrant:
        """What a launch needs of the cluster, not the record with its job list."""
        record = self.record
        return ClaimGrant(
            status=record.status,
            handle=record.handle,
            provision_request=record.provision_request,
            ever_up=record.ever_up,
            closed=closed,
        )

    async def _grant_next(self) -> None:
        launch = self.lock.grant_next()
        self._changed()
        try:
            await workflow.get_external_workflow_handle(launch.id).signal(
                LockSignal.CLAIM_GRANTED.value, self._grant()
            )
        except FailureError:
            # The launch is gone (terminated by an operator): the lock is free again.
            self.lock.release(launch)
            if self._liveness:
                holder_lost(self.record, launch.id)
            self._changed()

    async def _send_grant(self, launch: LockHolder) -> None:
        with contextlib.suppress(FailureError):
            await workflow.get_external_workflow_handle(launch.id).signal(
                LockSignal.CLAIM_GRANTED.value, self._grant()
            )

    async def _refuse_waiting(self) -> None:
        while (launch := self.lock.pop_waiting()) is not None:
            with contextlib.suppress(FailureError):
                await workflow.get_external_workflow_handle(launch.id).signal(
                    LockSignal.CLAIM_GRANTED.value, self._grant(closed=True)
                )

    async def _long(self, activity: Any, arg: Any) -> Any:
        return await run_long(activity, arg, timeout=_LONG_TIMEOUT)

    def _publish(self) -> None:
        """Upsert the status search attribute only when it changes (each upsert is a history event)."""
        status = self.record.status
        if status != self._published:
            workflow.upsert_search_attributes([STATUS.value_set(status.value)])
            workflow.set_current_details(f"cluster {self.record.name}: {status.value}")
            self._published = status


def _runner_lost(outcome: JobOutcome) -> bool:
    """A job failed with no exit code: its runner did not see it end (killed, or died at start)."""
    return (
        outcome.status == JobStatus.FAILED.value and outcome.exit_code is None and outcome.lost_rank is None
    )
