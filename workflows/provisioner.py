"""``Provisioner``: bring up N nodes for a task, with failover, from inside any workflow.

One search: optimize (a local activity), attempt the chosen candidate (``provision_attempt``),
classify its failure, remove what it left (compensation, also when the workflow is cancelled),
block the failure's scope (``workflows.failover``) and optimize again, until one candidate is up
or none is left. With ``retry_until_up`` the search starts again after a durable, backing-off
timer. Every failed attempt is reported in ``state`` as it happens.

The attempt provisions the chosen candidate whole (``optimizer.Candidate``: offering, market,
image, disk, ports of the alternative it satisfies), and the result hands back the request it
used, so a caller can keep it and bring back exactly these nodes later.

It is a helper class that runs inside its caller's workflow, not a child workflow, because:

- the caller's cancellation reaches the running attempt directly, and the compensation runs in
  the same cancellation scope, with nothing to coordinate across two workflows;
- the caller keeps what it already holds while provisioning (a launch: its cluster's lock) and
  shows the attempts in its own query without a signal per attempt;
- the caller continues as new with its own input between searches (``between_searches``),
  carrying ``state``: one history to bound and to replay, not two.

A managed job (``workflows.managed_task``) recovering from a preemption uses it with the preempted
region in ``blocklist`` or, to stay in its region, a ``pin``, and bounds its searches with
``max_searches``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta

from pydantic import BaseModel
from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, FailureError
from temporalio.workflow import ActivityCancellationType

with workflow.unsafe.imports_passed_through():
    from skyhop.activities import jobs, planning, provisioning
    from skyhop.activities.models import ClusterLeave, OptimizeInput
    from skyhop.activities.provisioning import AttemptOutcome
    from skyhop.contract import LONG_QUEUE, ErrorType, LaunchStage
    from skyhop.contract.clusters import FailoverAttempt, ProvisionState
    from skyhop.contract.job_index import JobIndexRow
    from skyhop.optimizer import Candidate, Minimize
    from skyhop.optimizer.blocklist import Blocked, Blocklist
    from skyhop.providers.base import ClusterHandle, ProvisionRequest
    from skyhop.providers.cloud import CLUSTER_TAG
    from skyhop.providers.errors import FailureScope
    from skyhop.spec import Task
    from skyhop.workflows.failover import block_for, history_table, retry_delay, scaled_up_region
    from skyhop.workflows.options import HEARTBEAT, LONG_RETRY, SHORT_RETRY, queue_for
    from skyhop.workflows.stages import raise_if_cancelled, run_long

__all__ = ["KEPT_ATTEMPTS", "ProvisionSpec", "Provisioned", "Provisioner", "remove_nodes"]

KEPT_ATTEMPTS = 50
"""Failed attempts ``ProvisionState`` lists; older ones are only counted, so days of
``--retry-until-up`` stay within one payload and a bounded history."""
_LONG_TIMEOUT = timedelta(hours=24)
"""Longest one provision attempt or cleanup may take."""


class ProvisionSpec(BaseModel):
    """What to bring up and how hard to try."""

    cluster_name: str
    task: Task
    """Its resources (and ``any_of``/``ordered`` alternatives) and ``num_nodes``."""
    minimize: Minimize = "cost"
    blocklist: Blocklist = Blocklist()
    """Places ruled out from the start (a managed job: the zone that preempted it)."""
    pin: Blocked | None = None
    """Stay inside this scope (a provider, region or zone); None: anywhere."""
    existing: ProvisionRequest | None = None
    """Nodes that exist (a stopped cluster): bring exactly these back in place, never elsewhere."""
    keep_nodes: bool = False
    """A failed attempt leaves the nodes it found (they were up before: a stopped cluster's)."""
    retry_until_up: bool = False
    """When every candidate failed, wait and search again, until one is up."""
    max_searches: int | None = None
    """With ``retry_until_up``: give up (ResourcesUnavailable) after this many failed searches; None:
    never (a managed job's ``max_searches``)."""
    attempt_scope: str | None = None
    """What attempt ids start with; None: the workflow id. A workflow that provisions several
    clusters (a managed job's tasks and recoveries) names each, so no two share a cloud token."""


class Provisioned(BaseModel):
    """Nodes that are up, and the request that brought them up (what a start re-creates)."""

    handle: ClusterHandle
    request: ProvisionRequest


class Provisioner:
    """Bring up ``spec``'s nodes with failover; see the module docstring."""

    def __init__(
        self,
        spec: ProvisionSpec,
        state: ProvisionState | None = None,
        *,
        enter: Callable[[LaunchStage], None] = lambda stage: None,
        between_searches: Callable[[ProvisionState], None] = lambda state: None,
        waiting: Callable[[ProvisionState], None] = lambda state: None,
    ) -> None:
        """``enter`` hears each stage (optimize, provision) as it begins; ``waiting`` hears that
        every candidate failed and the backoff timer starts (``state.retry_at``);
        ``between_searches`` is called before a search that follows a failed one, and may continue
        the caller as new."""
        self.spec = spec
        self.state = state or ProvisionState()
        """Attempts, searches and where the current attempt is: the caller shows and carries it."""
        self._enter = enter
        self._between_searches = between_searches
        self._waiting = waiting
        self._stage: str | None = None

    async def provision(self) -> Provisioned:
        """Search until a candidate comes up; ResourcesUnavailable when none did (and no retry)."""
        while True:
            provisioned = await self._search()
            if provisioned is not None:
                return provisioned
            self.state.searches += 1
            limit = self.spec.max_searches
            if not self.spec.retry_until_up or (limit is not None and self.state.searches >= limit):
                raise self._exhausted()
            delay = retry_delay(self.state.searches, workflow.random().random())
            self.state.retry_at = workflow.now().timestamp() + delay.total_seconds()
            workflow.set_current_details(f"every candidate failed; searching again in {delay}")
            self._waiting(self.state)
            await workflow.sleep(delay)
            self.state.retry_at = None
            self._between_searches(self.state)

    async def _search(self) -> Provisioned | None:
        """One pass over the candidates, best first; None when every one has failed."""
        spec, state = self.spec, self.state
        blocklist = (
            spec.blocklist if spec.pin is None else spec.blocklist.model_copy(update={"within": spec.pin})
        )
        tried = 0
        while True:
            request = await self._next(blocklist, tried)
            if request is None:
                return None
            offering = request.offering
            if state.attempts and state.attempts[-1].next_location is None:
                state.attempts[-1].next_location = offering.location
            state.chosen = offering
            self._begin(LaunchStage.PROVISION)
            outcome = await self._attempt(request)
            tried += 1
            if outcome.handle is not None:
                return Provisioned(handle=outcome.handle, request=request)
            failure = outcome.failure
            assert failure is not None
            entry = block_for(offering, failure.scope)
            self._record(
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
            if failure.leftover and not spec.keep_nodes:
                await self._compensate_attempt(request)
            if failure.scope == FailureScope.FATAL:
                raise ApplicationError(
                    f"{offering.location}: {failure.kind} ({failure.code}): {failure.message}",
                    type=ErrorType.PROVISION_FAILED,
                    non_retryable=True,
                )
            if entry is not None:
                blocklist = blocklist.with_entry(entry)

    async def _next(self, blocklist: Blocklist, tried: int) -> ProvisionRequest | None:
        """The next attempt's request: the existing nodes once, or the optimizer's next choice."""
        spec = self.spec
        if spec.existing is not None:
            return None if tried else spec.existing.model_copy(update={"attempt_id": self._attempt_id()})
        candidate = await self._choose(blocklist, tried)
        if candidate is None:
            return None
        request = candidate.request(
            spec.cluster_name, spec.task.num_nodes, self._attempt_id(), spec.task.config.provider_overrides
        )
        return request.model_copy(update={"scale_up_region": scaled_up_region(self.state.attempts)})

    def _attempt_id(self) -> str:
        """Same for every retry of one attempt, different across attempts (and runs): a cloud's token."""
        self.state.attempts_started += 1
        return f"{self.spec.attempt_scope or workflow.info().workflow_id}/{self.state.attempts_started}"

    def _begin(self, stage: LaunchStage) -> None:
        if stage != self._stage:
            self._stage = stage
            self._enter(stage)

    async def _choose(self, blocklist: Blocklist, tried: int) -> Candidate | None:
        """The optimizer's pick outside the blocklist; None once failures have ruled out everything."""
        if not tried:
            self._begin(LaunchStage.OPTIMIZE)
        spec = self.spec
        try:
            # Local: between attempts it runs in this worker, saving a task queue round trip each.
            plan = await workflow.execute_local_activity(
                planning.optimize,
                OptimizeInput(task=spec.task, blocklist=blocklist, minimize=spec.minimize),
                start_to_close_timeout=timedelta(seconds=60),
                retry_policy=SHORT_RETRY,
            )
        except (ActivityError, ApplicationError) as exc:
            # A local activity's failure arrives as its ApplicationError itself, not wrapped.
            cause = exc.cause if isinstance(exc, ActivityError) else exc
            if tried and isinstance(cause, ApplicationError) and cause.type == ErrorType.NO_FEASIBLE_OFFERING:
                return None
            raise
        choice: Candidate = plan.choice
        return choice

    async def _attempt(self, request: ProvisionRequest) -> AttemptOutcome:
        try:
            outcome: AttemptOutcome = await workflow.execute_activity(
                provisioning.provision_attempt,
                request,
                task_queue=queue_for(LONG_QUEUE, request),
                start_to_close_timeout=_LONG_TIMEOUT,
                heartbeat_timeout=HEARTBEAT,
                retry_policy=LONG_RETRY,
                # The attempt must have stopped before compensation looks for what it created.
                cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
                summary=f"{request.offering.location} {request.offering.instance_type} x{request.num_nodes}",
            )
            # Failed or up, an attempt the workflow was cancelled during must not go on to the next.
            raise_if_cancelled()
            return outcome
        except BaseException:
            # Compensation: cancelled or failed for good, the attempt must not leave instances behind.
            if not self.spec.keep_nodes:
                await self._compensate_attempt(request)
            raise

    async def _compensate_attempt(self, request: ProvisionRequest) -> None:
        """Remove whatever an attempt created, found by its tags in the attempt's location."""
        partial = ClusterHandle(cluster_name=request.cluster_name, offering=request.offering, nodes=[])
        await remove_nodes(partial, f"clean up {request.offering.location}")

    def _record(self, attempt: FailoverAttempt) -> None:
        state = self.state
        state.attempts.append(attempt)
        dropped = len(state.attempts) - KEPT_ATTEMPTS
        if dropped > 0:
            state.attempts = state.attempts[dropped:]
            state.earlier_attempts += dropped

    def _exhausted(self) -> ApplicationError:
        state, existing = self.state, self.spec.existing
        if existing is not None:
            message = (
                f"cluster {self.spec.cluster_name} stays in {existing.offering.location}, where it could "
                "not be brought up; retry later (or with --retry-until-up), or take it down first"
            )
        else:
            message = (
                f"no candidate could be provisioned ({state.earlier_attempts + len(state.attempts)} tried)"
            )
        earlier = (
            f"\n  ({state.earlier_attempts} earlier attempts not shown)" if state.earlier_attempts else ""
        )
        return ApplicationError(
            f"{message}:\n{history_table(state.attempts)}{earlier}",
            [a.model_dump() for a in state.attempts],
            type=ErrorType.RESOURCES_UNAVAILABLE,
            non_retryable=True,
        )


async def remove_nodes(handle: ClusterHandle, summary: str, *, report: JobIndexRow | None = None) -> None:
    """Remove the cluster's nodes; a cancellation arriving meanwhile waits until that is done.
    ``report``: a managed job's row, sent by the same activity (``activities.jobs.leave_cluster``).

    A cleanup that fails for good (the cloud refuses the credentials) ends the workflow with a
    sentence saying what may be left, instead of being retried forever.
    """
    removal = (
        run_long(provisioning.terminate, handle, timeout=_LONG_TIMEOUT, summary=summary)
        if report is None
        else run_long(
            jobs.leave_cluster,
            ClusterLeave(handle=handle, report=report),
            timeout=_LONG_TIMEOUT,
            summary=summary,
        )
    )
    cleanup = asyncio.ensure_future(removal)
    try:
        await asyncio.shield(cleanup)
    except asyncio.CancelledError:
        await cleanup
        raise
    except ActivityError as exc:
        reason = exc.cause.message if isinstance(exc.cause, FailureError) else exc.message
        raise ApplicationError(
            f"could not remove what was created at {handle.offering.location} "
            f"({reason}); look for instances tagged "
            f"{CLUSTER_TAG}={handle.cluster_name} there",
            type=ErrorType.CLEANUP_FAILED,
            non_retryable=True,
        ) from exc
