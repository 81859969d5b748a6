"""``PoolWorkflow``: a pool of workers for managed jobs, one per pool (id ``pool:<name>``).

Each worker is an ordinary cluster (``<name>-worker-<id>``): a child ``LaunchWorkflow`` brings it
up with the pool task (provisioning with failover, waiting for capacity, setup; no run), so it has
its ``ClusterWorkflow`` and job queue like any launched cluster, and ``skyhop status`` lists it. The
pool only decides which workers should exist (``workflows.pool_plan``) and who uses them:

- ``apply`` (an update) sets the task and the worker count. More workers: new ones are brought up.
  Fewer: idle ones go first, busy ones when their job gives them back. A new task (setup,
  resources): the workers of the old version are replaced once idle.
- A job (``acquire``) waits in line for an idle worker; the pool signals it ``worker_assigned`` and
  it runs on that cluster's job queue; ``release`` gives the worker back (``lost``: the worker's
  nodes were taken under the job, so it is replaced).
- A worker's nodes are checked with the provider every ``check_seconds``; a worker whose nodes are
  gone, or whose launch failed, is torn down and a new one is brought up in its place (a job on a
  lost worker hears its run end, finds the nodes gone and waits for another worker).
- Cancelled (``pool down``), it cancels the jobs holding or waiting for a worker, tears every worker
  down and completes with its state (DOWN).

Between changes it waits on one condition and the idle checks' timers; once the history is long and
no worker is being brought up or torn down, it continues as new carrying its state.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, ChildWorkflowError, FailureError

with workflow.unsafe.imports_passed_through():
    from skyhop.activities.clusters import ClusterActivities
    from skyhop.contract import LAUNCH_WORKFLOW, LONG_QUEUE, WorkflowType
    from skyhop.contract.clusters import LaunchRequest, LaunchResult
    from skyhop.contract.failures import innermost_message
    from skyhop.contract.pools import (
        PoolApply,
        PoolClaim,
        PoolQuery,
        PoolRelease,
        PoolRequest,
        PoolSignal,
        PoolState,
        PoolStatus,
        PoolUpdate,
        PoolWorker,
        WorkerAssigned,
        WorkerStatus,
        worker_cluster_name,
    )
    from skyhop.contract.search import STATUS
    from skyhop.workflows.options import LONG_RETRY
    from skyhop.workflows.pool_plan import failure_backoff, surplus_workers, workers_to_add
    from skyhop.workflows.recovery import nodes_lost
    from skyhop.workflows.stages import history_is_long, node_statuses, raise_if_cancelled_by

__all__ = ["PoolWorkflow"]

_DOWN_TIMEOUT = timedelta(hours=1)


class _Leave(Exception):
    """The worker is to be torn down (with why, when it is replaced)."""


@workflow.defn(name=WorkflowType.POOL)
class PoolWorkflow:
    @workflow.init
    def __init__(self, request: PoolRequest) -> None:
        self.request = request
        self.state = request.state or PoolState(name=request.name)
        self._keepers: dict[int, asyncio.Task[None]] = {}
        self._leaving: dict[int, str | None] = {}
        """Workers told to go: worker id -> why (None: not wanted any more)."""
        self._sending: set[asyncio.Task[None]] = set()
        self._changed = 0

    @workflow.query(name=PoolQuery.STATE)
    def query_state(self) -> PoolState:
        return self.state

    @workflow.update(name=PoolUpdate.APPLY)
    def apply(self, applied: PoolApply) -> PoolState:
        """The pool's task and size from now on (a changed task is a new version)."""
        state = self.state
        if state.task is None or applied.task != state.task:
            state.version += 1
            state.task = applied.task
        state.workers_wanted = applied.workers
        self._poke()
        return state

    @apply.validator
    def _validate_apply(self, applied: PoolApply) -> None:
        if self.state.status in (PoolStatus.SHUTTING_DOWN, PoolStatus.DOWN):
            raise ApplicationError(f"pool {self.state.name} is going down; apply it again once it is down")

    @workflow.signal(name=PoolSignal.ACQUIRE)
    def acquire(self, claim: PoolClaim) -> None:
        state = self.state
        held = next((w for w in state.workers if w.job_workflow == claim.job_workflow), None)
        if held is not None:
            self._tell(held)  # asked again (say, after a continue-as-new): the same worker
        elif all(c.job_workflow != claim.job_workflow for c in state.waiting):
            state.waiting.append(claim)
        self._poke()

    @workflow.signal(name=PoolSignal.RELEASE)
    def release(self, release: PoolRelease) -> None:
        state = self.state
        state.waiting = [c for c in state.waiting if c.job_workflow != release.job_workflow]
        # By the job, not the id it names: a job cancelled as its worker was being assigned names none.
        worker = next((w for w in state.workers if w.job_workflow == release.job_workflow), None)
        if worker is not None:
            worker.job_workflow = worker.job_id = None
            if worker.status == WorkerStatus.BUSY:
                worker.status = WorkerStatus.IDLE
            if release.lost is not None:
                self._leaving[worker.worker_id] = release.lost
        self._poke()

    @workflow.run
    async def run(self, request: PoolRequest) -> PoolState:
        for worker in self.state.workers:
            self._keep(worker)
        try:
            while True:
                self._plan()
                self._assign()
                self._publish()
                seen = self._changed
                await workflow.wait_condition(
                    lambda seen=seen: self._changed != seen or self._may_continue()  # type: ignore[misc]
                )
                if self._changed == seen and self._may_continue():
                    await workflow.wait_condition(
                        lambda: not self._sending and workflow.all_handlers_finished()
                    )
                    for keeper in self._keepers.values():
                        keeper.cancel()
                    await asyncio.gather(*self._keepers.values(), return_exceptions=True)
                    workflow.continue_as_new(request.model_copy(update={"state": self.state}))
        except asyncio.CancelledError:
            await self._shut_down()
        return self.state

    # -- which workers exist ------------------------------------------------------------------------

    def _plan(self) -> None:
        state = self.state
        if state.status == PoolStatus.SHUTTING_DOWN:
            return
        for worker_id, why in surplus_workers(state).items():
            self._leaving.setdefault(worker_id, why)
        for _ in range(workers_to_add(state, leaving=set(self._leaving))):
            worker = PoolWorker(
                worker_id=state.next_worker_id,
                cluster_name=worker_cluster_name(state.name, state.next_worker_id),
                version=state.version,
            )
            state.next_worker_id += 1
            state.workers.append(worker)
            self._keep(worker)

    def _keep(self, worker: PoolWorker) -> None:
        self._keepers[worker.worker_id] = asyncio.create_task(self._worker(worker))

    async def _worker(self, worker: PoolWorker) -> None:
        """Bring the worker up (unless it is up), watch it while it is wanted, then tear it down."""
        try:
            if worker.handle is None:
                await self._bring_up(worker)
            await self._watch(worker)
        except _Leave as leave:
            worker.message = str(leave) or worker.message
            if worker.status == WorkerStatus.FAILED:
                self.state.failures += 1
                self._poke()
                await workflow.sleep(failure_backoff(self.state.failures))
        except asyncio.CancelledError:
            if self.state.status != PoolStatus.SHUTTING_DOWN:
                raise  # a continue-as-new: the worker stays as it is, the next run watches it
        worker.status = WorkerStatus.SHUTTING_DOWN
        self._poke()
        await workflow.execute_activity_method(
            ClusterActivities.down_cluster,
            worker.cluster_name,
            task_queue=LONG_QUEUE,
            start_to_close_timeout=_DOWN_TIMEOUT,
            retry_policy=LONG_RETRY,
            summary=f"tear down {worker.cluster_name}",
        )
        self.state.workers.remove(worker)
        self._leaving.pop(worker.worker_id, None)
        self._keepers.pop(worker.worker_id, None)
        self._poke()

    async def _bring_up(self, worker: PoolWorker) -> None:
        task = self.state.task
        assert task is not None
        try:
            result: LaunchResult = await workflow.execute_child_workflow(
                LAUNCH_WORKFLOW,
                LaunchRequest(
                    cluster_name=worker.cluster_name, task=task, user=self.request.user, retry_until_up=True
                ),
                id=f"{workflow.info().workflow_id}:launch:{worker.cluster_name}",
                result_type=LaunchResult,
            )
        except ChildWorkflowError as exc:
            worker.status = WorkerStatus.FAILED
            raise _Leave(f"could not be brought up: {innermost_message(exc)}") from exc
        worker.handle = result.handle
        worker.status = WorkerStatus.IDLE
        self.state.failures = 0
        self._poke()

    async def _watch(self, worker: PoolWorker) -> None:
        """Until the worker must leave; its nodes are checked every ``check_seconds``."""
        every = timedelta(seconds=self.request.check_seconds)
        while True:
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(lambda: worker.worker_id in self._leaving, timeout=every)
            if worker.worker_id in self._leaving:
                raise _Leave(self._leaving[worker.worker_id] or "")
            if worker.handle is not None:
                try:
                    statuses = await node_statuses(worker.handle)
                except ActivityError as exc:
                    raise_if_cancelled_by(exc)
                    continue  # not answered: asked again at the next check, never taken for a loss
                if statuses is not None and nodes_lost(statuses):
                    # Torn down under a job, the job hears its run end and finds the nodes gone.
                    self._leaving.setdefault(worker.worker_id, "its nodes were lost: replaced")

    # -- who uses them ------------------------------------------------------------------------------

    def _assign(self) -> None:
        """Give idle workers to waiting jobs, first come first served (current version first)."""
        state = self.state
        idle = sorted(
            (w for w in state.workers if w.status == WorkerStatus.IDLE and w.worker_id not in self._leaving),
            key=lambda w: (w.version != state.version, w.worker_id),
        )
        for worker in idle:
            if not state.waiting:
                return
            claim = state.waiting.pop(0)
            worker.status, worker.job_workflow, worker.job_id = (
                WorkerStatus.BUSY,
                claim.job_workflow,
                claim.job_id,
            )
            self._tell(worker)

    def _tell(self, worker: PoolWorker) -> None:
        assert worker.handle is not None and worker.job_workflow is not None
        assigned = WorkerAssigned(
            worker_id=worker.worker_id, cluster_name=worker.cluster_name, handle=worker.handle
        )
        task = asyncio.create_task(self._signal(worker, worker.job_workflow, assigned))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _signal(self, worker: PoolWorker, job_workflow: str, assigned: WorkerAssigned) -> None:
        try:
            await workflow.get_external_workflow_handle(job_workflow).signal(
                PoolSignal.WORKER_ASSIGNED, assigned
            )
        except FailureError:
            # The job ended meanwhile (cancelled while it waited): the worker is free again.
            if worker.job_workflow == job_workflow:
                worker.job_workflow = worker.job_id = None
                worker.status = WorkerStatus.IDLE
                self._poke()

    # -- the end ------------------------------------------------------------------------------------

    async def _shut_down(self) -> None:
        state = self.state
        state.status = PoolStatus.SHUTTING_DOWN
        self._publish()
        jobs = [w.job_workflow for w in state.workers if w.job_workflow] + [
            c.job_workflow for c in state.waiting
        ]
        for job in jobs:
            with contextlib.suppress(FailureError):  # ended already
                await workflow.get_external_workflow_handle(job).cancel()
        state.waiting = []
        for worker in state.workers:
            self._leaving.setdefault(worker.worker_id, "the pool is going down")
            keeper = self._keepers.get(worker.worker_id)
            if keeper is None or keeper.done():
                self._keep(worker)
            elif worker.status == WorkerStatus.PROVISIONING:
                keeper.cancel()  # its launch is cancelled (it removes what it created), then torn down
        await asyncio.gather(*list(self._keepers.values()), return_exceptions=True)
        state.status = PoolStatus.DOWN
        self._publish()

    def _may_continue(self) -> bool:
        # A failed worker waits out its back-off in this run: the next would launch it again.
        busy = (WorkerStatus.PROVISIONING, WorkerStatus.SHUTTING_DOWN, WorkerStatus.FAILED)
        return (
            history_is_long(self.request.history_limit)
            and not self._leaving
            and all(w.status not in busy for w in self.state.workers)
        )

    def _poke(self) -> None:
        self._changed += 1

    def _publish(self) -> None:
        state = self.state
        if state.status not in (PoolStatus.SHUTTING_DOWN, PoolStatus.DOWN):
            up = sum(1 for w in state.workers if w.version == state.version and w.status in _UP)
            state.status = PoolStatus.READY if up >= state.workers_wanted else PoolStatus.PROVISIONING
        if workflow.info().typed_search_attributes.get(STATUS) != state.status:
            workflow.upsert_search_attributes([STATUS.value_set(state.status.value)])


_UP = (WorkerStatus.IDLE, WorkerStatus.BUSY)
