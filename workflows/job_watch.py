"""A cluster's job watcher as its workflow sees it: each started job's end arrives as an event.

``ClusterWorkflow`` asks ``JobWatcher.end_of(job)`` instead of holding a ``wait_job`` activity per
running job. One ``watch_jobs`` activity (``activities.job_watch``) follows every started job of the
cluster and returns only when something changed; this class hands each outcome to the job waiting
for it and re-arms the activity while jobs are left. So a running job costs no worker slot and no
history event until it ends; a cluster with jobs costs one slot. The same activity ships each job's
output to the store (``WatchedJob.log``), where ``skyhop logs`` reads it.

- A job is followed from its placement, before it is started: a watcher armed earlier returns
  when the job's folder appears on a node (it is newer than ``newer_than``), and is re-armed with it.
- A worker that dies takes the activity with it; Temporal retries it on another worker after the
  heartbeat timeout, and it reads the jobs' state from the nodes again.
- Continue-as-new abandons the activity (it ends when its heartbeat finds the run closed); the next
  run follows the carried jobs with a watcher of its own.

``notify_ended`` is how another workflow (a ``JobSubmission.notify``) learns that its job ended.
Managed jobs' runs are followed by watch hubs instead (``workflows.watch_hub``).
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, FailureError

with workflow.unsafe.imports_passed_through():
    from skyhop.activities import job_watch
    from skyhop.activities.models import WatchedJob, WatchJobsInput, WatchJobsResult
    from skyhop.contract import JOB_ENDED_SIGNAL, LONG_QUEUE, JobStatus
    from skyhop.contract.clusters import JobEnded, JobRecord
    from skyhop.providers.base import ClusterHandle
    from skyhop.providers.runtime.jobs import JobOutcome
    from skyhop.storage.logs import job_stream
    from skyhop.workflows.options import HEARTBEAT, LONG_RETRY, queue_for

__all__ = ["JOB_EVENTS_PATCH", "JobWatcher", "notify_ended"]

JOB_EVENTS_PATCH = "job-ends-are-events"
"""Patch id: jobs are followed by the cluster's watcher; runs from before it keep their ``wait_job``."""


class JobWatcher:
    """The outcomes of a cluster's started jobs, from one ``watch_jobs`` activity at a time."""

    def __init__(self) -> None:
        self._jobs: dict[int, WatchedJob] = {}
        self._ends: dict[int, asyncio.Future[JobOutcome]] = {}
        self._newest = 0
        """The highest job id followed: jobs start in id order (FIFO), so a newer one is a new job."""
        self._known: set[int] = set()
        """Newer jobs seen on nodes that need no following (ended in an earlier run, or left over)."""
        self._gone: set[int] = set()
        """Nodes of ``_handle`` a watcher reported gone: the next watchers need not say so again."""
        self._handle: ClusterHandle | None = None
        self._loop: asyncio.Task[None] | None = None

    def follow(self, job: JobRecord, handle: ClusterHandle) -> None:
        """Follow a placed job from now on (idempotent); arm a watcher if none is armed."""
        if job.job_id not in self._jobs:
            self._jobs[job.job_id] = WatchedJob(
                job_id=job.job_id,
                nodes=[a.node for a in job.placement] or list(range(job.num_nodes)),
                running=job.status == JobStatus.RUNNING,
                log=job_stream(job.task_id) if job.task_id else "",
            )
            self._ends[job.job_id] = asyncio.get_running_loop().create_future()
        self._newest = max(self._newest, job.job_id)
        self._known = {i for i in self._known if i > self._newest}
        if handle != self._handle:
            self._gone = set()
        self._handle = handle
        if self._loop is None:
            self._loop = asyncio.create_task(self._watch())

    def started(self, job_id: int) -> None:
        """The job runs on every node now: from the next watcher on, a missing record is a loss."""
        job = self._jobs.get(job_id)
        if job is not None:
            job.running = True

    async def end_of(self, job_id: int) -> JobOutcome:
        """The job's outcome once it ends; an ``ActivityError`` if the watcher failed for good."""
        try:
            return await self._ends[job_id]
        finally:
            self.forget(job_id)

    def forget(self, job_id: int) -> None:
        """Stop following a job (ended, cancelled, or its start failed); its outcome is dropped."""
        self._jobs.pop(job_id, None)
        future = self._ends.pop(job_id, None)
        if future is not None and not future.done():
            future.cancel()

    async def _watch(self) -> None:
        while self._jobs and self._handle is not None:
            jobs = list(self._jobs.values())
            try:
                result: WatchJobsResult = await workflow.execute_activity(
                    job_watch.watch_jobs,
                    WatchJobsInput(
                        handle=self._handle,
                        jobs=jobs,
                        newer_than=self._newest,
                        known=sorted(self._known),
                        gone=sorted(self._gone),
                    ),
                    task_queue=queue_for(LONG_QUEUE, self._handle),
                    start_to_close_timeout=timedelta(days=365),
                    heartbeat_timeout=HEARTBEAT,
                    retry_policy=LONG_RETRY,
                    summary=f"watch {len(jobs)} jobs",
                )
            except ActivityError as exc:
                for job in jobs:
                    self._settle(job.job_id, exc)
                continue
            self._known.update(i for i in result.newer if i not in self._jobs)
            self._gone.update(result.gone)
            for job_id, outcome in result.ended.items():
                self._settle(job_id, outcome)
        self._loop = None

    def _settle(self, job_id: int, end: JobOutcome | ActivityError) -> None:
        self._jobs.pop(job_id, None)
        future = self._ends.get(job_id)
        if future is None or future.done():
            return
        if isinstance(end, JobOutcome):
            future.set_result(end)
        else:
            future.set_exception(end)


async def notify_ended(workflow_id: str, ended: JobEnded) -> None:
    """Signal ``JOB_ENDED`` to the workflow that asked for it; one that is gone is not waited for."""
    with contextlib.suppress(FailureError):
        await workflow.get_external_workflow_handle(workflow_id).signal(JOB_ENDED_SIGNAL, ended)
