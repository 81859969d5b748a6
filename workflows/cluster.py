"""``ClusterWorkflow``: one entity workflow per cluster (id ``cluster:<name>``).

It replaces SkyPilot's per-cluster lock and cluster table: every change to the cluster goes
through it, one at a time. Launches take its lock with the ``claim`` signal and give it back with
``release``; ``submit_job`` (an update) queues a job and the workflow runs it as an activity;
``down`` (an update) tears the cluster down and ends the workflow.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, FailureError

with workflow.unsafe.imports_passed_through():
    from activities import jobs, provisioning
    from activities.models import RunJobInput
    from optimizer import mismatch
    from spec import Task
    from workflows.contract import (
        CLUSTER_WORKFLOW,
        LONG_QUEUE,
        ClaimGrant,
        ClaimRequest,
        ClusterInput,
        ClusterRecord,
        ClusterStatus,
        JobRecord,
        JobStatus,
        JobSubmission,
        Release,
    )
    from workflows.options import HEARTBEAT, LONG_RETRY
    from workflows.search import STATUS

__all__ = ["ClusterWorkflow"]


@workflow.defn(name=CLUSTER_WORKFLOW)
class ClusterWorkflow:
    @workflow.init
    def __init__(self, input: ClusterInput) -> None:
        self.record = input.record
        self._tasks: dict[int, Task] = {}
        self._runs: dict[int, asyncio.Task[None]] = {}

    @workflow.run
    async def run(self, input: ClusterInput) -> ClusterRecord:
        self._publish()
        while True:
            await workflow.wait_condition(
                lambda: self._grantable() or self._closed() or self._should_continue_as_new()
            )
            if self._closed():
                break
            if self._grantable():
                await self._grant_next()
                continue
            await workflow.wait_condition(workflow.all_handlers_finished)
            workflow.continue_as_new(ClusterInput(record=self.record))
        await self._refuse_waiting()
        await workflow.wait_condition(workflow.all_handlers_finished)
        return self.record

    @workflow.query
    def status(self) -> ClusterRecord:
        """The cluster's record: status, handle, jobs."""
        return self.record

    @workflow.signal
    def claim(self, request: ClaimRequest) -> None:
        """A launch asks for the lock; it will get ``claim_granted`` in turn."""
        if request.launch_id != self.record.holder and request.launch_id not in self.record.waiting:
            self.record.waiting.append(request.launch_id)

    @workflow.signal
    def release(self, release: Release) -> None:
        """The holder gives the lock back, with the cluster it provisioned, if any."""
        if release.launch_id != self.record.holder:
            return
        record = self.record
        if release.handle is not None:
            record.handle = release.handle
            record.status = ClusterStatus.UP
            record.ever_up = True
            record.launched_at = record.launched_at or workflow.now().timestamp()
            record.resources = release.resources or record.resources
            record.num_nodes = release.num_nodes or record.num_nodes
            record.user = release.user or record.user
        if release.idle_minutes is not None:
            record.idle_minutes = release.idle_minutes
            record.autostop_down = release.autostop_down
        if release.failed and not record.ever_up:
            record.status = ClusterStatus.TERMINATED
        record.holder = None
        self._publish()

    @workflow.update
    async def submit_job(self, submission: JobSubmission) -> JobRecord:
        """Queue a job; a repeated ``request_id`` returns the job it created the first time."""
        for job in self.record.jobs:
            if job.request_id == submission.request_id:
                return job
        reason = self._refusal(submission.task)
        if reason is not None:
            raise ApplicationError(reason, type="SubmitRejected")
        now = workflow.now()
        job_id = self.record.next_job_id
        self.record.next_job_id += 1
        job = JobRecord(
            job_id=job_id,
            name=submission.task.name,
            user=submission.user,
            request_id=submission.request_id,
            submitted_at=now.timestamp(),
            num_nodes=submission.task.num_nodes,
            resources=submission.task.resources.describe(),
            task_id=f"skyhop-{now:%Y-%m-%d-%H-%M-%S-%f}_{self.record.name}_{job_id}",
        )
        self.record.jobs.append(job)
        self._tasks[job_id] = submission.task
        self._runs[job_id] = asyncio.create_task(self._run_job(job, submission))
        return job

    @submit_job.validator
    def _validate_submit(self, submission: JobSubmission) -> None:
        if any(job.request_id == submission.request_id for job in self.record.jobs):
            return
        reason = self._refusal(submission.task)
        if reason is not None:
            raise ApplicationError(reason, type="SubmitRejected")

    @workflow.update
    async def down(self) -> ClusterRecord:
        """Tear the cluster down (after any launch holding it finishes) and end the workflow."""
        await workflow.wait_condition(lambda: self.record.holder is None)
        if self.record.status == ClusterStatus.TERMINATED:
            return self.record
        self.record.holder = "down"
        for run in self._runs.values():
            run.cancel()
        await asyncio.gather(*self._runs.values(), return_exceptions=True)
        if self.record.handle is not None:
            await workflow.execute_activity(
                provisioning.terminate,
                self.record.handle,
                task_queue=LONG_QUEUE,
                start_to_close_timeout=timedelta(minutes=30),
                heartbeat_timeout=timedelta(minutes=5),
                retry_policy=LONG_RETRY,
            )
        self.record.status = ClusterStatus.TERMINATED
        self.record.holder = None
        self._publish()
        return self.record

    def _refusal(self, task: Task) -> str | None:
        record = self.record
        if record.status != ClusterStatus.UP or record.handle is None:
            return f"cluster {record.name} is {record.status.value}, not UP"
        if task.run is None:
            return "the task has no 'run' command"
        return mismatch(task.resources, task.num_nodes, record.handle.offering, len(record.handle.nodes))

    async def _run_job(self, job: JobRecord, submission: JobSubmission) -> None:
        assert self.record.handle is not None
        job.status = JobStatus.RUNNING
        job.started_at = workflow.now().timestamp()
        try:
            outcome = await workflow.execute_activity(
                jobs.run_job,
                RunJobInput(
                    handle=self.record.handle,
                    job=job,
                    task=submission.task,
                    sync_workdir=submission.sync_workdir,
                ),
                task_queue=LONG_QUEUE,
                start_to_close_timeout=timedelta(days=365),
                heartbeat_timeout=HEARTBEAT,
                retry_policy=LONG_RETRY,
                summary=f"job {job.job_id}",
            )
            job.status = JobStatus(outcome.status)
            job.exit_code = outcome.exit_code
            job.failed_rank = outcome.failed_rank
            job.error = outcome.error
        except (asyncio.CancelledError, ActivityError) as exc:
            job.status = JobStatus.CANCELLED if isinstance(exc, asyncio.CancelledError) else JobStatus.FAILED
            job.error = None if isinstance(exc, asyncio.CancelledError) else str(exc.cause or exc)
        finally:
            job.ended_at = workflow.now().timestamp()
            self._tasks.pop(job.job_id, None)
            self._runs.pop(job.job_id, None)

    def _closed(self) -> bool:
        return self.record.status == ClusterStatus.TERMINATED and self.record.holder is None

    def _grantable(self) -> bool:
        return self.record.holder is None and bool(self.record.waiting)

    def _should_continue_as_new(self) -> bool:
        idle = self.record.holder is None and not self.record.waiting and not self._runs
        return idle and workflow.info().is_continue_as_new_suggested()

    async def _grant_next(self) -> None:
        launch_id = self.record.waiting.pop(0)
        self.record.holder = launch_id
        try:
            await workflow.get_external_workflow_handle(launch_id).signal(
                "claim_granted", ClaimGrant(record=self.record)
            )
        except FailureError:
            # The launch is gone (terminated by an operator): the lock is free again.
            self.record.holder = None

    async def _refuse_waiting(self) -> None:
        while self.record.waiting:
            launch_id = self.record.waiting.pop(0)
            with contextlib.suppress(FailureError):
                await workflow.get_external_workflow_handle(launch_id).signal(
                    "claim_granted", ClaimGrant(record=self.record, closed=True)
                )

    def _publish(self) -> None:
        workflow.upsert_search_attributes([STATUS.value_set(self.record.status.value)])
        workflow.set_current_details(f"cluster {self.record.name}: {self.record.status.value}")
