"""``LaunchWorkflow``: optimize -> provision (failover) -> sync workdir -> sync file mounts -> setup -> exec.

Each stage is an activity; the current stage is exposed by the ``progress`` query, the
``SkyhopStage`` search attribute and the workflow's current details in the Web UI. The launch
holds its cluster's lock (``ClusterWorkflow``) from before provisioning until setup has run, so
two launches of one cluster never provision twice.

Provisioning is ``workflows.provisioner.Provisioner``: failover over the optimizer's candidates,
each failed attempt recorded in ``progress.attempts``. A cluster that exists stays where it is,
with the nodes it had (the request the cluster kept). With ``--retry-until-up`` the launch
continues as new between searches once its history is long, carrying its progress (the most
recent attempts and stages, and counts of older ones) and the cluster's lock, which it still holds.

A cancelled launch ends CANCELLED having removed what it created: the attempt's instances, and
a cluster it brought up (a cluster that existed before keeps running; only what the launch
started on it, its setup, is stopped). After each long activity it checks for a cancellation
its completion consumed (``workflows.stages.raise_if_cancelled``).
"""

from __future__ import annotations

import contextlib
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ApplicationError, FailureError
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from skyhop.activities.clusters import ClusterActivities
    from skyhop.activities.models import OpenClusterInput, SubmitJobInput
    from skyhop.contract import (
        LAUNCH_WORKFLOW,
        LOCK_LEASE_WORKFLOW,
        SHORT_QUEUE,
        WORKFLOW_QUEUE,
        ClusterStatus,
        ErrorType,
        LaunchStage,
        LockSignal,
        cluster_workflow_id,
        setup_key,
    )
    from skyhop.contract.clusters import (
        ClaimGrant,
        ClaimRequest,
        JobSubmission,
        LaunchProgress,
        LaunchRequest,
        LaunchResult,
        LaunchResume,
        LockLease,
        ProvisionState,
        Release,
    )
    from skyhop.contract.search import STAGE
    from skyhop.optimizer import mismatch
    from skyhop.providers.base import ClusterHandle
    from skyhop.storage.plan import MountPlan, cluster_storage, storage_plan
    from skyhop.workflows.lock_lease import lease_id
    from skyhop.workflows.options import SHORT_RETRY
    from skyhop.workflows.provisioner import Provisioned, Provisioner, ProvisionSpec, remove_nodes
    from skyhop.workflows.stages import history_is_long, prepare_nodes, raise_if_cancelled

__all__ = ["LaunchWorkflow"]

_LONG_TIMEOUT = timedelta(hours=24)
"""Longest one sync or setup step may take."""
_KEPT_STAGES = 40
"""Finished stages a continue-as-new carries (each search adds two: optimize, provision)."""
_LEASED_CLAIM = "lock-lease-and-signal-with-start-claim"
"""Patch id: the launch starts its lock lease, then claims the lock with the cluster's start."""


@workflow.defn(name=LAUNCH_WORKFLOW)
class LaunchWorkflow:
    @workflow.init
    def __init__(self, request: LaunchRequest) -> None:
        self.request = request
        resume = request.resume
        self._progress = (
            resume.progress
            if resume is not None
            else LaunchProgress(stage=LaunchStage.LOCK, stage_started_at=workflow.now().timestamp())
        )
        self._grant: ClaimGrant | None = None
        self._provisioner: Provisioner | None = None
        self._continuing = False
        """Set as the launch continues as new: its next run holds the cluster's lock on."""

    @workflow.query
    def progress(self) -> LaunchProgress:
        """The current stage, the stages done with their durations, and the job id once known."""
        if self._provisioner is None:
            return self._progress
        state = self._provisioner.state
        return self._progress.model_copy(
            update={
                "chosen": state.chosen,
                "attempts": state.attempts,
                "earlier_attempts": state.earlier_attempts,
                "retry_at": state.retry_at,
            }
        )

    @workflow.signal(name=LockSignal.CLAIM_GRANTED.value)
    def claim_granted(self, grant: ClaimGrant) -> None:
        """The cluster gives this launch its lock."""
        self._grant = grant

    @workflow.run
    async def run(self, request: LaunchRequest) -> LaunchResult:
        self._publish_stage()
        try:
            grant = (
                await self._hold_on(request.resume)
                if request.resume is not None
                else await self._lock_cluster()
            )
            handle, provisioned = await self._prepare_cluster(grant)
            job_id = await self._submit(handle) if request.task.run is not None else None
        except BaseException as exc:
            if self._continuing:
                raise
            if not self._progress.error and workflow.cancellation_reason() is not None:
                self._progress.error = "launch cancelled; what it created was removed"
            self._progress.error = self._progress.error or str(getattr(exc, "cause", None) or exc)
            self._enter(LaunchStage.FAILED)
            raise
        self._enter(LaunchStage.DONE)
        return LaunchResult(
            cluster_name=request.cluster_name, job_id=job_id, provisioned=provisioned, handle=handle
        )

    async def _lock_cluster(self) -> ClaimGrant:
        """Start the cluster (unless it runs) and claim its lock in one step, then wait for the grant.

        From the claim on, every way out gives the lock back: ``_prepare_cluster`` releases it,
        a launch that stops waiting (cancelled, say by ``down``) gives up its place in the queue
        here, and one that ends running neither (terminated, timed out) has its lease
        (``workflows.lock_lease``), started before the claim, give the lock back for it.
        """
        request = self.request
        claim = ClaimRequest(launch_id=workflow.info().workflow_id)
        # Launches that began before leases and signal-with-start claim as they did, so they replay.
        leased = workflow.patched(_LEASED_CLAIM)
        try:
            if leased:
                await self._start_lease()
            await workflow.execute_activity_method(
                ClusterActivities.open_cluster,
                OpenClusterInput(
                    cluster_name=request.cluster_name, user=request.user, claim=claim if leased else None
                ),
                task_queue=SHORT_QUEUE,
                start_to_close_timeout=timedelta(seconds=30),
                retry_policy=SHORT_RETRY,
            )
            if not leased:
                cluster = workflow.get_external_workflow_handle(cluster_workflow_id(request.cluster_name))
                await cluster.signal(LockSignal.CLAIM.value, claim)
            await workflow.wait_condition(lambda: self._grant is not None)
        except BaseException:
            # Give up the place in the queue; a cluster that never got the claim has none to give.
            with contextlib.suppress(FailureError):
                await self._release(Release(launch_id=claim.launch_id, failed=True))
            raise
        assert self._grant is not None
        if self._grant.closed:
            raise ApplicationError(
                f"cluster {request.cluster_name} was taken down while this launch waited for it",
                type=ErrorType.CLUSTER_GONE,
                non_retryable=True,
            )
        return self._grant

    async def _start_lease(self) -> None:
        """The child that gives the lock back if this run ends without doing so (terminated, timed out)."""
        launch_id = workflow.info().workflow_id
        await workflow.start_child_workflow(
            LOCK_LEASE_WORKFLOW,
            LockLease(cluster_name=self.request.cluster_name, launch_id=launch_id),
            id=lease_id(launch_id, workflow.uuid4().hex[:12]),
            task_queue=WORKFLOW_QUEUE,
            parent_close_policy=ParentClosePolicy.REQUEST_CANCEL,
        )

    async def _hold_on(self, resume: LaunchResume) -> ClaimGrant:
        """After a continue-as-new the launch still holds the lock; its new run needs a lease of its own.

        The previous run's lease was cancelled as that run closed, and it released nothing, since
        this run was already running by then.
        """
        await self._start_lease()
        return resume.grant

    async def _release(self, release: Release) -> None:
        cluster = workflow.get_external_workflow_handle(cluster_workflow_id(self.request.cluster_name))
        await cluster.signal(LockSignal.RELEASE.value, release)

    async def _prepare_cluster(self, grant: ClaimGrant) -> tuple[ClusterHandle, bool]:
        """Provision unless the cluster is UP, then sync and set up, all under the cluster's lock."""
        request, task = self.request, self.request.task
        handle = grant.handle if grant.status == ClusterStatus.UP else None
        mounts = storage_plan(task.file_mounts)
        # The cluster hears of the buckets even if the launch fails: it may have created them.
        release = Release(launch_id=workflow.info().workflow_id, failed=True, storage=cluster_storage(mounts))
        created: ClusterHandle | None = None
        """The cluster this launch brought up where there was none: a cancellation removes it."""
        try:
            if handle is not None:
                reason = mismatch(task.resources, task.num_nodes, handle.offering, len(handle.nodes))
                if reason is not None:
                    raise ApplicationError(reason, type=ErrorType.RESOURCES_MISMATCH, non_retryable=True)
                self._progress.reused = True
                idle_minutes, down = self._autostop()
                release = release.model_copy(update={"idle_minutes": idle_minutes, "autostop_down": down})
            else:
                provisioned = await self._provision(grant)
                handle = provisioned.handle
                created = handle if grant.handle is None else None
                idle_minutes, down = self._autostop()
                release = release.model_copy(
                    update={
                        "handle": handle,
                        "provision_request": provisioned.request,
                        "resources": task.resources,
                        "num_nodes": task.num_nodes,
                        "user": request.user,
                        "idle_minutes": idle_minutes,
                        "autostop_down": down,
                    }
                )
            self._progress.handle = handle
            await self._sync_and_setup(handle, mounts)
            release = release.model_copy(update={"failed": False, "task": task})
        except BaseException:
            if workflow.cancellation_reason() is not None:
                if created is not None:
                    await remove_nodes(created, f"tear down {created.offering.location}")
                    release = release.model_copy(update={"handle": None})
                elif handle is not None:
                    self._progress.error = (
                        f"launch cancelled; cluster {request.cluster_name} existed before it, so it "
                        "was left as it was, with what this launch started on it (setup) stopped"
                    )
            raise
        finally:
            if not self._continuing:  # the next run holds the lock on (``_continue_if_long``)
                await self._release(release)
        return handle, not self._progress.reused

    def _autostop(self) -> tuple[int | None, bool]:
        """Idle minutes and down-or-stop: ``-i``/``--down`` win over the task's ``resources.autostop``."""
        if self.request.idle_minutes is not None:
            return self.request.idle_minutes, self.request.down
        autostop = self.request.task.resources.autostop
        return (autostop.idle_minutes, autostop.down) if autostop is not None else (None, False)

    async def _provision(self, grant: ClaimGrant) -> Provisioned:
        """Bring the nodes up with failover; a cluster that exists keeps its nodes' place and kind."""
        request = self.request
        existing = None
        if grant.handle is not None:
            existing = grant.provision_request or grant.handle.request()
        spec = ProvisionSpec(
            cluster_name=request.cluster_name,
            task=request.task,
            minimize=request.minimize,
            existing=existing,
            keep_nodes=existing is not None and grant.ever_up,
            retry_until_up=request.retry_until_up,
        )
        resume = request.resume
        self._provisioner = Provisioner(
            spec,
            resume.provision if resume is not None else None,
            enter=self._begin,
            between_searches=lambda state: self._continue_if_long(grant, state),
        )
        return await self._provisioner.provision()

    def _continue_if_long(self, grant: ClaimGrant, state: ProvisionState) -> None:
        """Between searches, continue as new once the history is long; the next run keeps the lock."""
        if not history_is_long(self.request.history_limit):
            return
        progress = self.progress()
        dropped = max(len(progress.finished_stages) - _KEPT_STAGES, 0)
        progress = progress.model_copy(
            update={
                "finished_stages": progress.finished_stages[dropped:],
                "earlier_stages": progress.earlier_stages + dropped,
            }
        )
        self._continuing = True
        resume = LaunchResume(grant=grant, progress=progress, provision=state)
        workflow.continue_as_new(self.request.model_copy(update={"resume": resume}))

    async def _sync_and_setup(self, handle: ClusterHandle, mounts: list[MountPlan]) -> None:
        key = setup_key(workflow.info().workflow_id)
        await prepare_nodes(
            handle, self.request.task, key, mounts=mounts, timeout=_LONG_TIMEOUT, enter=self._begin
        )
        raise_if_cancelled()

    async def _submit(self, handle: ClusterHandle) -> int:
        self._begin(LaunchStage.EXEC)
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

    def _begin(self, stage: LaunchStage) -> None:
        """Go on to the next stage, unless the launch was cancelled meanwhile."""
        raise_if_cancelled()
        self._enter(stage)

    def _publish_stage(self) -> None:
        """Make ``SkyhopStage`` name the stage the launch is in, whatever its starter set (or not)."""
        if workflow.info().typed_search_attributes.get(STAGE) != self._progress.stage:
            workflow.upsert_search_attributes([STAGE.value_set(self._progress.stage)])

    def _enter(self, stage: LaunchStage) -> None:
        now = workflow.now().timestamp()
        previous = self._progress
        finished = [*previous.finished_stages, (previous.stage, round(now - previous.stage_started_at, 3))]
        self._progress = previous.model_copy(
            update={"stage": stage, "stage_started_at": now, "finished_stages": finished}
        )
        workflow.upsert_search_attributes([STAGE.value_set(stage)])
        workflow.set_current_details(f"stage: {stage}")
