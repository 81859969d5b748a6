"""``LaunchWorkflow``: optimize -> provision (failover) -> sync workdir -> sync file mounts -> setup -> exec.

Each stage is an activity; the current stage is exposed by the ``progress`` query, the
``SkyhopStage`` search attribute and the workflow's current details in the Web UI. The launch
holds its cluster's lock (``ClusterWorkflow``) from before provisioning until setup has run, so
two launches of one cluster never provision twice.

Provisioning is a failover loop: one ``provision_attempt`` per candidate; a classified failure is
recorded in ``progress.attempts``, whatever the attempt created is removed (compensation, also
when the launch is cancelled), its scope is blocked and the optimizer chooses again. A cluster
that exists stays where it is. See ``workflows.failover`` for the rules.

A cancelled launch ends CANCELLED having removed what it created: the attempt's instances, and
a cluster it brought up (a cluster that existed before keeps running; only what the launch
started on it, its setup, is stopped). Long activities are awaited until their cancellation
completes, and such an activity may finish with a result instead (an attempt that returns its
capacity failure just before it sees the cancel); Temporal then hands back the result and the
cancellation is consumed, so the launch asks ``workflow.cancellation_reason()`` after each of
them (``_raise_if_cancelled``) rather than going on to the next candidate.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, FailureError
from temporalio.workflow import ActivityCancellationType, ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from activities import planning, provisioning
    from activities.clusters import ClusterActivities
    from activities.models import (
        OpenClusterInput,
        OptimizeInput,
        SubmitJobInput,
    )
    from activities.provisioning import AttemptOutcome
    from optimizer import mismatch
    from optimizer.blocklist import Blocklist
    from providers.base import ClusterHandle, Offering, ProvisionRequest
    from providers.cloud import CLUSTER_TAG
    from providers.errors import FailureScope
    from workflows.contract import (
        LAUNCH_WORKFLOW,
        LOCK_LEASE_WORKFLOW,
        LONG_QUEUE,
        SHORT_QUEUE,
        WORKFLOW_QUEUE,
        ClaimGrant,
        ClaimRequest,
        ClusterStatus,
        FailoverAttempt,
        JobSubmission,
        LaunchProgress,
        LaunchRequest,
        LaunchResult,
        LockLease,
        LockSignal,
        Release,
        cluster_workflow_id,
        setup_key,
    )
    from workflows.failover import block_for, history_table, retry_delay
    from workflows.lock_lease import lease_id
    from workflows.options import HEARTBEAT, LONG_RETRY, SHORT_RETRY
    from workflows.search import STAGE
    from workflows.stages import prepare_nodes, run_long

__all__ = ["LaunchWorkflow"]

_LONG_TIMEOUT = timedelta(hours=24)
"""Longest one provisioning, sync or setup step may take."""
_LEASED_CLAIM = "lock-lease-and-signal-with-start-claim"
"""Patch id: the launch starts its lock lease, then claims the lock with the cluster's start."""


@workflow.defn(name=LAUNCH_WORKFLOW)
class LaunchWorkflow:
    @workflow.init
    def __init__(self, request: LaunchRequest) -> None:
        self.request = request
        self._progress = LaunchProgress(stage="lock", stage_started_at=workflow.now().timestamp())
        self._grant: ClaimGrant | None = None
        self._attempts_started = 0

    @workflow.query
    def progress(self) -> LaunchProgress:
        """The current stage, the stages done with their durations, and the job id once known."""
        return self._progress

    @workflow.signal(name=LockSignal.CLAIM_GRANTED.value)
    def claim_granted(self, grant: ClaimGrant) -> None:
        """The cluster gives this launch its lock."""
        self._grant = grant

    @workflow.run
    async def run(self, request: LaunchRequest) -> LaunchResult:
        try:
            grant = await self._lock_cluster()
            handle, provisioned = await self._prepare_cluster(grant)
            job_id = await self._submit(handle) if request.task.run is not None else None
        except BaseException as exc:
            if not self._progress.error and workflow.cancellation_reason() is not None:
                self._progress.error = "launch cancelled; what it created was removed"
            self._progress.error = self._progress.error or str(getattr(exc, "cause", None) or exc)
            self._enter("failed")
            raise
        self._enter("done")
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
                await workflow.start_child_workflow(
                    LOCK_LEASE_WORKFLOW,
                    LockLease(cluster_name=request.cluster_name, launch_id=claim.launch_id),
                    id=lease_id(claim.launch_id, workflow.uuid4().hex[:12]),
                    task_queue=WORKFLOW_QUEUE,
                    parent_close_policy=ParentClosePolicy.REQUEST_CANCEL,
                )
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
                type="ClusterGone",
                non_retryable=True,
            )
        return self._grant

    async def _release(self, release: Release) -> None:
        cluster = workflow.get_external_workflow_handle(cluster_workflow_id(self.request.cluster_name))
        await cluster.signal(LockSignal.RELEASE.value, release)

    async def _prepare_cluster(self, grant: ClaimGrant) -> tuple[ClusterHandle, bool]:
        """Provision unless the cluster is UP, then sync and set up, all under the cluster's lock."""
        request, task = self.request, self.request.task
        handle = grant.handle if grant.status == ClusterStatus.UP else None
        release = Release(launch_id=workflow.info().workflow_id, failed=True)
        created: ClusterHandle | None = None
        """The cluster this launch brought up where there was none: a cancellation removes it."""
        try:
            if handle is not None:
                reason = mismatch(task.resources, task.num_nodes, handle.offering, len(handle.nodes))
                if reason is not None:
                    raise ApplicationError(reason, type="ResourcesMismatch", non_retryable=True)
                self._progress.reused = True
                idle_minutes, down = self._autostop()
                release = release.model_copy(update={"idle_minutes": idle_minutes, "autostop_down": down})
            else:
                handle = await self._provision(grant)
                created = handle if grant.handle is None else None
                idle_minutes, down = self._autostop()
                release = release.model_copy(
                    update={
                        "handle": handle,
                        "resources": task.resources,
                        "num_nodes": task.num_nodes,
                        "user": request.user,
                        "idle_minutes": idle_minutes,
                        "autostop_down": down,
                    }
                )
            self._progress.handle = handle
            await self._sync_and_setup(handle)
            release = release.model_copy(update={"failed": False, "task": task})
        except BaseException:
            if workflow.cancellation_reason() is not None:
                if created is not None:
                    await self._compensate(created, f"tear down {created.offering.location}")
                    release = release.model_copy(update={"handle": None})
                elif handle is not None:
                    self._progress.error = (
                        f"launch cancelled; cluster {request.cluster_name} existed before it, so it "
                        "was left as it was, with what this launch started on it (setup) stopped"
                    )
            raise
        finally:
            await self._release(release)
        return handle, not self._progress.reused

    def _autostop(self) -> tuple[int | None, bool]:
        """Idle minutes and down-or-stop: ``-i``/``--down`` win over the task's ``resources.autostop``."""
        if self.request.idle_minutes is not None:
            return self.request.idle_minutes, self.request.down
        autostop = self.request.task.resources.autostop
        return (autostop.idle_minutes, autostop.down) if autostop is not None else (None, False)

    async def _provision(self, record: ClaimGrant) -> ClusterHandle:
        """Search until a candidate comes up; with ``retry_until_up``, search again after a durable timer."""
        # A cluster that exists keeps its region and zone: no failover elsewhere.
        pinned = record.handle.offering if record.handle is not None else None
        searches = 0
        while True:
            handle = await self._search(pinned, keep_nodes=pinned is not None and record.ever_up)
            if handle is not None:
                return handle
            searches += 1
            if not self.request.retry_until_up:
                raise self._exhausted(pinned)
            delay = retry_delay(searches, workflow.random().random())
            self._progress.retry_at = workflow.now().timestamp() + delay.total_seconds()
            workflow.set_current_details(f"every candidate failed; searching again in {delay}")
            await workflow.sleep(delay)
            self._progress.retry_at = None

    async def _search(self, pinned: Offering | None, keep_nodes: bool) -> ClusterHandle | None:
        """One pass over the candidates, cheapest first; None when every one has failed."""
        blocklist = Blocklist()
        tried = 0
        while True:
            offering = pinned if pinned is not None else await self._choose(blocklist, tried)
            if offering is None or (pinned is not None and tried):
                return None
            if self._progress.attempts and self._progress.attempts[-1].next_location is None:
                self._progress.attempts[-1].next_location = offering.location
            self._progress.chosen = offering
            if self._progress.stage != "provision":
                self._begin("provision")
            attempt = self._attempt_request(offering)
            outcome = await self._attempt(attempt, keep_nodes)
            tried += 1
            if outcome.handle is not None:
                return outcome.handle
            failure = outcome.failure
            assert failure is not None
            entry = block_for(offering, failure.scope)
            self._progress.attempts.append(
                FailoverAttempt(
                    provider=offering.provider,
                    region=offering.region,
                    zone=offering.zone,
                    instance_type=offering.instance_type,
                    kind=failure.kind,
                    code=failure.code,
                    message=failure.message,
                    blocked=failure.scope.value if entry is not None else "nothing",
                )
            )
            if failure.leftover and not keep_nodes:
                await self._compensate_attempt(attempt)
            if failure.scope == FailureScope.FATAL:
                raise ApplicationError(
                    f"{offering.location}: {failure.kind} ({failure.code}): {failure.message}",
                    type="ProvisionFailed",
                    non_retryable=True,
                )
            if entry is not None:
                blocklist = blocklist.with_entry(entry)

    async def _choose(self, blocklist: Blocklist, tried: int) -> Offering | None:
        """The optimizer's pick outside the blocklist; None once failures have ruled out everything."""
        if not tried:
            self._begin("optimize")
        try:
            # Local: between attempts it runs in this worker, saving a task queue round trip each.
            plan = await workflow.execute_local_activity(
                planning.optimize,
                OptimizeInput(task=self.request.task, blocklist=blocklist, minimize=self.request.minimize),
                start_to_close_timeout=timedelta(seconds=60),
                retry_policy=SHORT_RETRY,
            )
        except (ActivityError, ApplicationError) as exc:
            # A local activity's failure arrives as its ApplicationError itself, not wrapped.
            cause = exc.cause if isinstance(exc, ActivityError) else exc
            if tried and isinstance(cause, ApplicationError) and cause.type == "NoFeasibleOffering":
                return None
            raise
        chosen: Offering = plan.chosen
        return chosen

    def _attempt_request(self, offering: Offering) -> ProvisionRequest:
        task = self.request.task
        self._attempts_started += 1
        return ProvisionRequest(
            cluster_name=self.request.cluster_name,
            offering=offering,
            num_nodes=task.num_nodes,
            use_spot=task.resources.use_spot,
            ports=task.resources.ports or [],
            image_id=task.resources.image_for(offering.region),
            disk_size=task.resources.disk_size,
            attempt_id=f"{workflow.info().workflow_id}/{self._attempts_started}",
        )

    async def _attempt(self, attempt: ProvisionRequest, keep_nodes: bool) -> AttemptOutcome:
        try:
            outcome: AttemptOutcome = await workflow.execute_activity(
                provisioning.provision_attempt,
                attempt,
                task_queue=LONG_QUEUE,
                start_to_close_timeout=timedelta(hours=24),
                heartbeat_timeout=HEARTBEAT,
                retry_policy=LONG_RETRY,
                # The attempt must have stopped before compensation looks for what it created.
                cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
                summary=f"{attempt.offering.location} {attempt.offering.instance_type} x{attempt.num_nodes}",
            )
            # Failed or up, an attempt the launch was cancelled during must not go on to the next.
            _raise_if_cancelled()
            return outcome
        except BaseException:
            # Compensation: cancelled or failed for good, the attempt must not leave instances behind.
            if not keep_nodes:
                await self._compensate_attempt(attempt)
            raise

    async def _compensate_attempt(self, attempt: ProvisionRequest) -> None:
        """Remove whatever an attempt created, found by its tags in the attempt's location."""
        partial = ClusterHandle(cluster_name=attempt.cluster_name, offering=attempt.offering, nodes=[])
        await self._compensate(partial, f"clean up {attempt.offering.location}")

    async def _compensate(self, handle: ClusterHandle, summary: str) -> None:
        """Remove the cluster's nodes; a cancellation arriving meanwhile waits until that is done.

        A cleanup that fails for good (the cloud refuses the credentials) ends the launch with a
        sentence saying what may be left, instead of being retried forever.
        """
        cleanup = asyncio.ensure_future(self._long(provisioning.terminate, handle, summary))
        try:
            await asyncio.shield(cleanup)
        except asyncio.CancelledError:
            await cleanup
            raise
        except ActivityError as exc:
            reason = exc.cause.message if isinstance(exc.cause, FailureError) else exc.message
            raise ApplicationError(
                f"could not remove what this launch created at {handle.offering.location} "
                f"({reason}); look for instances tagged "
                f"{CLUSTER_TAG}={handle.cluster_name} there",
                type="CleanupFailed",
                non_retryable=True,
            ) from exc

    def _exhausted(self, pinned: Offering | None) -> ApplicationError:
        attempts = self._progress.attempts
        if pinned is not None:
            message = (
                f"cluster {self.request.cluster_name} stays in {pinned.location}, where it could not be "
                f"brought up; retry later (or with --retry-until-up), or take it down first"
            )
        else:
            message = f"no candidate could be provisioned ({len(attempts)} tried)"
        return ApplicationError(
            f"{message}:\n{history_table(attempts)}",
            [a.model_dump() for a in attempts],
            type="ResourcesUnavailable",
            non_retryable=True,
        )

    async def _sync_and_setup(self, handle: ClusterHandle) -> None:
        key = setup_key(workflow.info().workflow_id)
        await prepare_nodes(handle, self.request.task, key, timeout=_LONG_TIMEOUT, enter=self._begin)
        _raise_if_cancelled()

    async def _submit(self, handle: ClusterHandle) -> int:
        self._begin("exec")
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
        return await run_long(activity, arg, timeout=_LONG_TIMEOUT, summary=summary)

    def _begin(self, stage: str) -> None:
        """Go on to the next stage, unless the launch was cancelled meanwhile."""
        _raise_if_cancelled()
        self._enter(stage)

    def _enter(self, stage: str) -> None:
        now = workflow.now().timestamp()
        previous = self._progress
        finished = [*previous.finished_stages, (previous.stage, round(now - previous.stage_started_at, 3))]
        self._progress = previous.model_copy(
            update={"stage": stage, "stage_started_at": now, "finished_stages": finished}
        )
        workflow.upsert_search_attributes([STAGE.value_set(stage)])
        workflow.set_current_details(f"stage: {stage}")


def _raise_if_cancelled() -> None:
    """Re-raise a cancellation an activity's completion consumed (see the module docstring)."""
    if workflow.cancellation_reason() is not None:
        raise asyncio.CancelledError("the launch was cancelled")
