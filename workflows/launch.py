"""``LaunchWorkflow``: optimize -> provision -> sync workdir -> sync file mounts -> setup -> exec.

Each stage is an activity; the current stage is exposed by the ``progress`` query, the
``SkyhopStage`` search attribute and the workflow's current details in the Web UI. The launch
holds its cluster's lock (``ClusterWorkflow``) from before provisioning until setup has run, so
two launches of one cluster never provision twice.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from activities import jobs, planning, provisioning, sync
    from activities.clusters import ClusterActivities
    from activities.models import (
        FileMountsInput,
        OpenClusterInput,
        OptimizeInput,
        ProvisionInput,
        SetupInput,
        SubmitJobInput,
        SyncWorkdirInput,
    )
    from optimizer import mismatch
    from providers.base import ClusterHandle
    from workflows.contract import (
        LAUNCH_WORKFLOW,
        LONG_QUEUE,
        SHORT_QUEUE,
        ClaimGrant,
        ClaimRequest,
        ClusterRecord,
        ClusterStatus,
        JobSubmission,
        LaunchProgress,
        LaunchRequest,
        LaunchResult,
        Release,
        cluster_workflow_id,
        setup_key,
    )
    from workflows.options import HEARTBEAT, LONG_RETRY, SHORT_RETRY
    from workflows.search import STAGE

__all__ = ["LaunchWorkflow"]


@workflow.defn(name=LAUNCH_WORKFLOW)
class LaunchWorkflow:
    @workflow.init
    def __init__(self, request: LaunchRequest) -> None:
        self.request = request
        self._progress = LaunchProgress(stage="lock", stage_started_at=workflow.now().timestamp())
        self._grant: ClaimGrant | None = None

    @workflow.query
    def progress(self) -> LaunchProgress:
        """The current stage, the stages done with their durations, and the job id once known."""
        return self._progress

    @workflow.signal
    def claim_granted(self, grant: ClaimGrant) -> None:
        """The cluster gives this launch its lock."""
        self._grant = grant

    @workflow.run
    async def run(self, request: LaunchRequest) -> LaunchResult:
        try:
            record = await self._lock_cluster()
            handle, provisioned = await self._prepare_cluster(record)
            job_id = await self._submit(handle) if request.task.run is not None else None
        except BaseException as exc:
            self._progress.error = str(getattr(exc, "cause", None) or exc)
            self._enter("failed")
            raise
        self._enter("done")
        return LaunchResult(
            cluster_name=request.cluster_name, job_id=job_id, provisioned=provisioned, handle=handle
        )

    async def _lock_cluster(self) -> ClusterRecord:
        request = self.request
        await workflow.execute_activity_method(
            ClusterActivities.open_cluster,
            OpenClusterInput(cluster_name=request.cluster_name, user=request.user),
            task_queue=SHORT_QUEUE,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=SHORT_RETRY,
        )
        cluster = workflow.get_external_workflow_handle(cluster_workflow_id(request.cluster_name))
        await cluster.signal("claim", ClaimRequest(launch_id=workflow.info().workflow_id))
        await workflow.wait_condition(lambda: self._grant is not None)
        assert self._grant is not None
        if self._grant.closed:
            raise ApplicationError(
                f"cluster {request.cluster_name} was taken down while this launch waited for it",
                type="ClusterGone",
                non_retryable=True,
            )
        return self._grant.record

    async def _prepare_cluster(self, record: ClusterRecord) -> tuple[ClusterHandle, bool]:
        """Provision unless the cluster is UP, then sync and set up, all under the cluster's lock."""
        request, task = self.request, self.request.task
        handle = record.handle if record.status == ClusterStatus.UP else None
        release = Release(launch_id=workflow.info().workflow_id, failed=True)
        try:
            if handle is not None:
                reason = mismatch(task.resources, task.num_nodes, handle.offering, len(handle.nodes))
                if reason is not None:
                    raise ApplicationError(reason, type="ResourcesMismatch", non_retryable=True)
                self._progress.reused = True
            else:
                handle = await self._provision()
                release = release.model_copy(
                    update={
                        "handle": handle,
                        "resources": task.resources,
                        "num_nodes": task.num_nodes,
                        "user": request.user,
                        "idle_minutes": request.idle_minutes,
                        "autostop_down": request.down,
                    }
                )
            self._progress.handle = handle
            await self._sync_and_setup(handle)
            release = release.model_copy(update={"failed": False})
        finally:
            cluster = workflow.get_external_workflow_handle(cluster_workflow_id(request.cluster_name))
            await cluster.signal("release", release)
        return handle, not self._progress.reused

    async def _provision(self) -> ClusterHandle:
        task = self.request.task
        self._enter("optimize")
        plan = await workflow.execute_activity(
            planning.optimize,
            OptimizeInput(task=task),
            task_queue=SHORT_QUEUE,
            start_to_close_timeout=timedelta(seconds=60),
            retry_policy=SHORT_RETRY,
        )
        self._progress.chosen = plan.chosen
        self._enter("provision")
        attempt = ProvisionInput(
            cluster_name=self.request.cluster_name,
            offering=plan.chosen,
            num_nodes=task.num_nodes,
            use_spot=task.resources.use_spot,
        )
        try:
            handle: ClusterHandle = await self._long(
                provisioning.provision, attempt, f"{plan.chosen.location} x{task.num_nodes}"
            )
            return handle
        except BaseException:
            # Compensation: whatever the failed attempt created must not outlive it.
            partial = ClusterHandle(cluster_name=attempt.cluster_name, offering=plan.chosen, nodes=[])
            await self._long(provisioning.terminate, partial, "clean up the failed attempt")
            raise

    async def _sync_and_setup(self, handle: ClusterHandle) -> None:
        task = self.request.task
        if task.workdir:
            self._enter("sync_workdir")
            await self._long(sync.sync_workdir, SyncWorkdirInput(handle=handle, workdir=task.workdir))
        if task.file_mounts:
            self._enter("sync_file_mounts")
            await self._long(
                sync.sync_file_mounts, FileMountsInput(handle=handle, file_mounts=task.file_mounts)
            )
        if task.setup:
            self._enter("setup")
            key = setup_key(workflow.info().workflow_id)
            await self._long(jobs.run_setup, SetupInput(handle=handle, task=task, key=key))

    async def _submit(self, handle: ClusterHandle) -> int:
        self._enter("exec")
        job = await workflow.execute_activity_method(
            ClusterActivities.submit_job,
            SubmitJobInput(
                cluster_name=self.request.cluster_name,
                submission=JobSubmission(
                    request_id=workflow.info().workflow_id, task=self.request.task, user=self.request.user
                ),
            ),
            task_queue=SHORT_QUEUE,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=SHORT_RETRY,
        )
        self._progress.job_id = job.job_id
        return job.job_id

    async def _long(self, activity: Any, arg: Any, summary: str | None = None) -> Any:
        return await workflow.execute_activity(
            activity,
            arg,
            task_queue=LONG_QUEUE,
            start_to_close_timeout=timedelta(hours=24),
            heartbeat_timeout=HEARTBEAT,
            retry_policy=LONG_RETRY,
            summary=summary,
        )

    def _enter(self, stage: str) -> None:
        now = workflow.now().timestamp()
        previous = self._progress
        finished = [*previous.finished_stages, (previous.stage, round(now - previous.stage_started_at, 3))]
        self._progress = previous.model_copy(
            update={"stage": stage, "stage_started_at": now, "finished_stages": finished}
        )
        workflow.upsert_search_attributes([STAGE.value_set(stage)])
        workflow.set_current_details(f"stage: {stage}")
