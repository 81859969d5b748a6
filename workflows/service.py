"""``ServiceWorkflow``: a service's controller, one per service (id ``service:<name>``).

It keeps ``target`` replicas of the current version running, each a ``ServiceReplica`` on a
cluster of its own (``workflows.service_replica``), and what to launch or remove is
``workflows.service_plan.plan_replicas``: a failed replica (FAILED, FAILED_INITIAL_DELAY,
FAILED_PROBING, PREEMPTED: ``workflows.service_replica``) is replaced, a scale-down removes the
replicas that serve nothing first, and ``update_version`` moves to a new version whose replicas are
READY before the old ones go, never past ``max_replicas`` (rolling, or blue-green: the whole new
set READY, then one push swaps it in). An update whose replicas fail before they are ever READY
``ROLLBACK_AFTER`` times rolls back by itself to the previous version (whose replicas kept serving)
and says so in ``ServiceState.update_message``. For a task that asks for spot, the autoscaler's
split into spot and on-demand replicas (``ondemand_target``) says which kind each new replica is.
Whenever the READY set changes it is pushed to the service's load balancer (``sync_load_balancer``,
which also starts the load balancer, once, on this worker's host); every ``AUTOSCALE_EVERY`` the
load balancer's request counts go through the autoscaler's pure ``decide``, whose state the
workflow keeps. While the target is zero replicas, ``watch_for_held`` watches the load balancer and
returns the moment it holds a request, and the autoscaler decides then (from zero it scales up at
once), so the first request waits for a launch, not for a tick as well.

Replicas that failed before they were ever READY make the next launches wait, longer each time
(``relaunch_delay``); those the plan wants meanwhile are listed PENDING until the wait is over. A
PREEMPTED replica is not its version's fault: it is replaced at once and counts toward no rollback.

Nothing is written to the history while the replicas are READY but their probes (an activity and
a timer per replica per probe interval) and the autoscaler's tick; once the history is long, at a
moment every replica is settled (READY or NOT_READY), the service continues as new carrying its
replicas, which are probed again from there. Cancelled (``serve down``), it removes every
replica's cluster and stops the load balancer, then completes with its final state (DOWN).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from skyhop.activities import serve
    from skyhop.activities.serve import WATCH_HELD_S, HeldWatch, LoadBalancerSync
    from skyhop.contract import LONG_QUEUE, SHORT_QUEUE, WorkflowType
    from skyhop.contract.failures import innermost_message
    from skyhop.contract.search import STATUS
    from skyhop.contract.serve import (
        ROLLBACK_AFTER,
        LoadBalancerStats,
        LoadBalancingPolicy,
        ReplicaEndpoint,
        ReplicaRecord,
        ReplicaStatus,
        ServiceOperation,
        ServiceQuery,
        ServiceRequest,
        ServiceResume,
        ServiceState,
        ServiceStatus,
        ServiceUpdate,
        ServiceVersionAccepted,
        ServiceVersionRequest,
        UpdateMode,
        replica_cluster_name,
    )
    from skyhop.serve.autoscaler import (
        AutoscalerInput,
        AutoscalerPolicy,
        AutoscalerState,
        ReplicaTarget,
        decide,
        replica_kinds,
    )
    from skyhop.serve.service_spec import asks_for_spot, autoscaler_policy, on_demand, service_of
    from skyhop.workflows.changes import Changes
    from skyhop.workflows.options import SHORT_RETRY
    from skyhop.workflows.service_plan import ReplicaPlan, plan_replicas, update_done
    from skyhop.workflows.service_replica import Probing, ServiceReplica
    from skyhop.workflows.stages import history_is_long

__all__ = ["AUTOSCALE_EVERY", "ServiceWorkflow", "relaunch_delay"]

AUTOSCALE_EVERY = timedelta(seconds=20)
"""How often the autoscaler reads the load balancer's counts (SkyServe's controller: 20 s)."""
_RELAUNCH_FIRST_S = 5.0
_RELAUNCH_MAX_S = 300.0
_CALL = timedelta(seconds=60)
_UPDATES_PATCH = "service-max-replicas-and-rollback"
"""Runs from before it launched past ``max_replicas`` during an update, and never rolled back."""
_UNCAPPED = 1 << 30
_SPOT_PATCH = "service-spot-fallback"
"""Runs from before it launched every replica as the task asked, with no on-demand fallback."""
_HELD_PATCH = "service-wake-on-held-request"
"""Runs from before a request held at zero replicas woke the autoscaler (it waited for its tick)."""
_WATCH = timedelta(seconds=WATCH_HELD_S + 60)
_WATCH_HEARTBEAT = timedelta(seconds=30)
_DRAIN_PATCH = "service-drain-before-removal"
"""Runs from before a leaving replica waited for the load balancer to drop it (its nodes went at
once, and requests routed to it meanwhile failed where no other replica could take them)."""
_STATES_PATCH = "service-replica-states"
"""Runs from before a failed replica asked the provider whether it was preempted, and before
replicas waiting for the relaunch back-off were listed PENDING."""
_BETWEEN_PROBES_PATCH = "service-continue-between-probes"
"""Runs from before the service continued as new only while no probe ran (``Probing``), and
before a replica stopped while probing ended once its probe answered (``ServiceReplica.stop``)."""
_TIMERS_FIRE_PATCH = "service-timers-fire"
"""Runs from before a replica stopped between probes, or drained before ``DRAIN_WAIT``, cancelled
its timer instead of leaving it to fire (``workflows.timers``)."""
_BASELINE = "service-baseline-1"
"""Asked once per run (``workflows.changes``): stands for every change above, so that a new run
records one marker, and one visibility write, instead of one for each."""


def relaunch_delay(failed_starts: int) -> float:
    """How long to wait before launching again after ``failed_starts`` replicas in a row failed
    before they were ever READY (a broken run would otherwise be relaunched in a tight loop)."""
    return min(_RELAUNCH_FIRST_S * 2.0 ** max(0, failed_starts - 1), _RELAUNCH_MAX_S)


@workflow.defn(name=WorkflowType.SERVICE)
class ServiceWorkflow:
    @workflow.init
    def __init__(self, request: ServiceRequest) -> None:
        self.request = request
        resume = request.resume
        if resume is not None:
            self.state, self.tasks, self.autoscaler = resume.state, dict(resume.tasks), resume.autoscaler
        else:
            self.state = ServiceState(name=request.name, user=request.user, started_at=workflow.time())
            self.tasks = {1: request.task}
            self.autoscaler = AutoscalerState.initial(self._policy())
            self.state.target = self.autoscaler.target
        self._runs: dict[int, asyncio.Task[None]] = {}
        self._replicas: dict[int, ServiceReplica] = {}
        self._changed = True
        self._pushed: list[ReplicaEndpoint] | None = None
        self._published: ServiceStatus | None = None
        self._stopping = False
        self._tick_due = False
        self._relaunch_timer_at: float | None = None
        self._capped = False
        """``max_replicas`` holds during updates, and a failed update rolls back (``_UPDATES_PATCH``)."""
        self._spot = False
        """Spot replicas with on-demand fallback, as the autoscaler says (``_SPOT_PATCH``)."""
        self._wake_on_held = False
        """At zero replicas, a held request wakes the autoscaler (``_HELD_PATCH``)."""
        self._watch: asyncio.Task[None] | None = None
        self._states = False
        """PENDING and PREEMPTED replicas (``_STATES_PATCH``)."""
        self._drain = False
        """A leaving replica's nodes go once the load balancer was told (``_DRAIN_PATCH``)."""
        self._between_probes = False
        """Continue as new only while no probe runs (``_BETWEEN_PROBES_PATCH``)."""
        self._cancels_timers = True
        """Replicas cancel the timers they stop waiting on (runs from before ``_TIMERS_FIRE_PATCH``)."""
        self._probing = Probing()
        self._timers: set[asyncio.Task[None]] = set()
        """Held so that the event loop's weak references are not their only ones."""

    @workflow.query(name=ServiceQuery.STATE)
    def query_state(self) -> ServiceState:
        return self.state

    @workflow.update(name=ServiceOperation.UPDATE_VERSION)
    def update_version(self, request: ServiceVersionRequest) -> ServiceVersionAccepted:
        """A new version: its replicas are launched now, the old ones go as the new become READY."""
        state = self.state
        previous = state.update.previous if state.update is not None else state.version
        state.version = state.latest_version = state.latest_version + 1
        self.tasks[state.version] = request.task
        state.update = ServiceUpdate(version=state.version, previous=previous, mode=request.mode)
        state.update_message = None
        self._retarget()
        return ServiceVersionAccepted(version=state.version)

    def _retarget(self) -> None:
        """The autoscaler starts again from the current target, clipped to the current version's policy."""
        state, target = self.state, self._target_under(self._policy())
        self.autoscaler = AutoscalerState(target=target)
        self._set_target(self._kinds())
        state.failed_starts, state.relaunch_at = 0, None
        self._changed = True

    def _target_under(self, policy: AutoscalerPolicy) -> int:
        """The autoscaler's target, within ``policy``'s bounds."""
        return max(policy.min_replicas, min(policy.ceiling, self.autoscaler.target))

    def _roll_back(self, reason: str | None) -> None:
        """The update's replicas keep failing before they are READY: back to the previous version."""
        state, update = self.state, self.state.update
        assert update is not None
        state.update_message = (
            f"the update to version {update.version} was rolled back to version {update.previous}: "
            f"{update.failed_starts} of its replicas failed before they were READY (the last: {reason})"
        )
        state.version, state.update = update.previous, None
        self._retarget()

    @update_version.validator
    def _check_version(self, request: ServiceVersionRequest) -> None:
        if self._stopping:
            raise ApplicationError(f"service {self.state.name} is shutting down", non_retryable=True)
        if request.task.service is None:
            raise ApplicationError("the new version's task has no service: section", non_retryable=True)
        if request.mode is UpdateMode.BLUE_GREEN:
            policy = autoscaler_policy(service_of(request.task))
            target = self._target_under(policy)
            if 2 * target > policy.ceiling:
                raise ApplicationError(
                    f"blue_green runs both versions' replicas at once: 2 x {target} is more than "
                    f"max_replicas ({policy.ceiling}); use --mode rolling, or raise max_replicas",
                    non_retryable=True,
                )

    @workflow.run
    async def run(self, request: ServiceRequest) -> ServiceState:
        changes = Changes(_BASELINE)
        self._capped = changes.has(_UPDATES_PATCH)
        self._spot = changes.has(_SPOT_PATCH)
        self._wake_on_held = changes.has(_HELD_PATCH)
        self._states = changes.has(_STATES_PATCH)
        self._drain = changes.has(_DRAIN_PATCH)
        self._between_probes = changes.has(_BETWEEN_PROBES_PATCH)
        self._cancels_timers = not changes.has(_TIMERS_FIRE_PATCH)
        self._set_target(self._kinds())
        try:
            await self._sync_load_balancer()
            for record in self.state.replicas:  # a run that continued as new: probe them again
                if record.status.settled:
                    self._start(record)
            await self._serve()
        except asyncio.CancelledError:
            await self._shut_down()
        return self.state

    async def _serve(self) -> None:
        self._timers.add(asyncio.create_task(self._ticks()))
        while True:
            self._changed = False
            self._reconcile()
            await self._sync_load_balancer()
            self._publish()
            await self._continue_if_long()
            self._wake_for_relaunch()
            self._watch_for_held()
            await workflow.wait_condition(lambda: self._changed or self._tick_due)
            if self._tick_due:
                self._tick_due = False
                await self._autoscale()

    # -- timers: each one fires, none is cancelled when something else wakes the loop, which saves
    # two events per wake (and the time-skipping test server refuses a cancel that races the fire)

    async def _ticks(self) -> None:
        """The autoscaler's clock."""
        while True:
            await workflow.sleep(AUTOSCALE_EVERY)
            self._tick_due = True

    def _wake_for_relaunch(self) -> None:
        """A timer for the end of the relaunch back-off, once per back-off."""
        at = self.state.relaunch_at
        if at is None or at == self._relaunch_timer_at:
            return
        self._relaunch_timer_at = at

        async def wake() -> None:
            await workflow.sleep(timedelta(seconds=max(0.001, at - workflow.time())))
            self._touch()

        timer = asyncio.create_task(wake())
        self._timers.add(timer)
        timer.add_done_callback(self._timers.discard)

    def _watch_for_held(self) -> None:
        """At zero replicas, one ``watch_for_held`` at a time: a held request wakes the autoscaler."""
        if not self._wake_on_held or self._watch is not None or self.autoscaler.target != 0:
            return
        if self.state.load_balancer is None:
            return  # the next sync starts it, and the watch with it
        self._watch = asyncio.create_task(self._held_watch())

    async def _held_watch(self) -> None:
        try:
            seen = await workflow.execute_activity(
                serve.watch_for_held,
                self.state.name,
                task_queue=LONG_QUEUE,  # minutes of waiting: never a slot of the short queue's
                start_to_close_timeout=_WATCH,
                heartbeat_timeout=_WATCH_HEARTBEAT,
                retry_policy=SHORT_RETRY,
            )
        except ActivityError:
            seen = HeldWatch.NO_LOAD_BALANCER
        finally:
            self._watch = None
        if seen == HeldWatch.HELD:
            self._tick_due = True  # decide now: from zero, the autoscaler scales up at once
        elif seen == HeldWatch.QUIET:
            self._touch()  # watch again
        # No load balancer: the next tick finds it gone and starts it again, then the watch.

    # -- replicas --------------------------------------------------------------------------------

    def _reconcile(self) -> None:
        state, now = self.state, workflow.time()
        plan = self._plan()
        for record in list(state.replicas):
            if record.replica_id not in plan.remove:
                continue
            if record.status == ReplicaStatus.PENDING:
                state.replicas.remove(record)  # never launched: nothing to remove
            else:
                record.status = ReplicaStatus.SHUTTING_DOWN  # out of the READY set at once
                self._stop(record.replica_id)
        backing_off = state.relaunch_at is not None and now < state.relaunch_at
        if backing_off and not self._states:
            return
        if not backing_off:
            state.relaunch_at = None
        for index in range(plan.launch):
            state.replicas.append(
                ReplicaRecord(
                    replica_id=state.next_replica_id,
                    version=state.version,
                    status=ReplicaStatus.PENDING,
                    cluster_name=replica_cluster_name(state.name, state.next_replica_id),
                    launched_at=now,
                    use_spot=state.ondemand_target is not None and index >= plan.launch_ondemand,
                )
            )
            state.next_replica_id += 1
        if not backing_off:
            for record in state.replicas:
                if record.status == ReplicaStatus.PENDING:
                    record.status, record.launched_at = ReplicaStatus.PROVISIONING, now
                    self._start(record)
        if state.update is not None and update_done(state.replicas, state.version, state.target):
            state.update = None

    def _plan(self) -> ReplicaPlan:
        """The plan over the replicas still running (one whose removal failed has no cluster to count)."""
        state = self.state
        mode = state.update.mode if state.update is not None else UpdateMode.ROLLING
        if not self._capped:
            return plan_replicas(state.replicas, state.version, state.target, _UNCAPPED, mode)
        running = [
            r for r in state.replicas if r.replica_id in self._runs or r.status == ReplicaStatus.PENDING
        ]
        ceiling = self._policy().ceiling
        return plan_replicas(running, state.version, state.target, ceiling, mode, state.ondemand_target)

    def _start(self, record: ReplicaRecord) -> None:
        task = self.tasks[record.version]
        if self._spot and not record.use_spot and asks_for_spot(task):
            task = on_demand(task)  # an on-demand fallback replica
        drained = self._out_of_load_balancer if self._drain else None
        replica = ServiceReplica(
            self.state.name,
            record,
            task,
            self._touch,
            asks_provider=self._states,
            drained=drained,
            probing=self._probing,
            cancels_timers=self._cancels_timers,
        )
        self._runs[record.replica_id] = asyncio.create_task(self._life(replica))
        self._replicas[record.replica_id] = replica

    def _stop(self, replica_id: int) -> None:
        """Scaled down, replaced or going down: its run is cancelled, at once, or (under
        ``_BETWEEN_PROBES_PATCH``) once its probe in flight answered (``ServiceReplica.stop``)."""
        if self._between_probes:
            self._replicas[replica_id].stop(self._runs[replica_id])
        else:
            self._runs[replica_id].cancel()

    async def _life(self, replica: ServiceReplica) -> None:
        """A replica from launch to removal; a failed one is then replaced by ``_reconcile``."""
        record, state = replica.record, self.state
        try:
            await replica.run()
        except asyncio.CancelledError:
            pass  # scaled down, replaced by a newer version, or the service is going down
        except (ActivityError, ApplicationError) as exc:
            # Its cluster could not be removed: it stays listed, FAILED, saying where to look.
            record.status, record.message = ReplicaStatus.FAILED, innermost_message(exc)
            self._runs.pop(record.replica_id, None)
            self._replicas.pop(record.replica_id, None)
            self._touch()
            return
        if record.status.failed:
            state.replaced += 1
            if record.status == ReplicaStatus.PREEMPTED:
                pass  # not its version's fault: replaced at once, and no update rolls back for it
            elif record.ready_at is None:
                state.failed_starts += 1
                state.relaunch_at = workflow.time() + relaunch_delay(state.failed_starts)
                update = state.update
                if self._capped and update is not None and record.version == update.version:
                    update.failed_starts += 1
                    if update.failed_starts >= ROLLBACK_AFTER:
                        self._roll_back(record.message)
            else:
                state.failed_starts = 0
        self._runs.pop(record.replica_id, None)
        self._replicas.pop(record.replica_id, None)
        state.replicas.remove(record)
        in_use = {r.version for r in state.replicas} | {state.version}
        if state.update is not None:
            in_use.add(state.update.previous)  # what a rollback returns to
        self.tasks = {version: task for version, task in self.tasks.items() if version in in_use}
        self._touch()

    def _out_of_load_balancer(self, replica_id: int) -> bool:
        """Whether the load balancer was last told a READY set without the replica (or is going away,
        or its set is unknown after a failed push: nothing to wait for then)."""
        pushed = self._pushed
        return self._stopping or pushed is None or all(e.replica_id != replica_id for e in pushed)

    def _touch(self) -> None:
        self._changed = True

    # -- load balancer and autoscaler ------------------------------------------------------------

    async def _sync_load_balancer(self) -> None:
        """Push the READY set when it changed (starting the load balancer if it is not running); a
        blue-green update's new replicas join it only at the switch."""
        held = set(self._plan().hold)
        ready = [
            endpoint
            for r in self.state.replicas
            if r.replica_id not in held and (endpoint := r.endpoint()) is not None
        ]
        if ready == self._pushed:
            return
        previous = self.state.load_balancer
        request = LoadBalancerSync(
            service=self.state.name,
            policy=self._balancing(),
            replicas=ready,
            port=previous.port if previous is not None else 0,
        )
        try:
            self.state.load_balancer = await workflow.execute_activity(
                serve.sync_load_balancer,
                request,
                task_queue=SHORT_QUEUE,
                start_to_close_timeout=_CALL,
                retry_policy=SHORT_RETRY,
            )
        except ActivityError as exc:
            self.state.message = f"load balancer: {innermost_message(exc)}"
            self._pushed = None  # tried again at the next change or tick
            return
        self.state.message = None
        self._pushed = ready

    async def _autoscale(self) -> None:
        try:
            stats: LoadBalancerStats | None = await workflow.execute_activity(
                serve.load_balancer_stats,
                self.state.name,
                task_queue=SHORT_QUEUE,
                start_to_close_timeout=_CALL,
                retry_policy=SHORT_RETRY,
            )
        except ActivityError:
            return  # no counts this tick: nothing changes
        if stats is None:
            self._pushed = None  # the load balancer is gone: the next sync starts it again
            self._touch()
            return
        facts = AutoscalerInput(
            now=workflow.time(),
            window_requests=stats.window_requests,
            window_seconds=stats.window_seconds,
            ready_spot=self._ready_spot(),
            use_spot=self._uses_spot(),
        )
        decision = decide(self._policy(), self.autoscaler, facts)
        self.autoscaler = decision.state
        self._set_target(decision.replicas)

    def _uses_spot(self) -> bool:
        return self._spot and asks_for_spot(self.tasks[self.state.version])

    def _ready_spot(self) -> int:
        state = self.state
        return sum(
            r.use_spot and r.status == ReplicaStatus.READY
            for r in state.replicas
            if r.version == state.version
        )

    def _kinds(self) -> ReplicaTarget:
        """The autoscaler's target as spot and on-demand replicas, from the replicas READY now."""
        return replica_kinds(self._policy(), self.autoscaler.target, self._uses_spot(), self._ready_spot())

    def _set_target(self, kinds: ReplicaTarget) -> None:
        state = self.state
        wanted = (kinds.total, kinds.ondemand if self._uses_spot() else None)
        if (state.target, state.ondemand_target) != wanted:
            state.target, state.ondemand_target = wanted
            self._touch()

    def _policy(self) -> AutoscalerPolicy:
        return autoscaler_policy(service_of(self.tasks[self.state.version]))

    def _balancing(self) -> LoadBalancingPolicy:
        chosen = service_of(self.tasks[self.state.version]).load_balancing_policy.value
        known = {policy.value for policy in LoadBalancingPolicy}
        return LoadBalancingPolicy(chosen) if chosen in known else LoadBalancingPolicy.LEAST_LOAD

    # -- the service's life ----------------------------------------------------------------------

    def _publish(self) -> None:
        state = self.state
        if not self._stopping:
            if any(r.status == ReplicaStatus.READY for r in state.replicas):
                state.status = ServiceStatus.READY
            elif state.status != ServiceStatus.STARTING:
                state.status = ServiceStatus.NO_REPLICA
        if state.status == self._published:
            return
        self._published = state.status
        workflow.upsert_search_attributes([STATUS.value_set(state.status.value)])
        workflow.set_current_details(f"status: {state.status}")

    async def _continue_if_long(self) -> None:
        """Continue as new once the history is long, at a moment no replica is in the middle of a
        step, nor of a probe (``Probing``: the probes in flight land first, and no new one starts)."""
        if not history_is_long(self.request.history_limit) or not self._settled():
            return
        if self._between_probes:
            await self._probing.hold()
            if not self._settled():  # a probe's answer changed a replica
                self._probing.release()
                return
        resume = ServiceResume(state=self.state, tasks=self.tasks, autoscaler=self.autoscaler)
        workflow.continue_as_new(self.request.model_copy(update={"resume": resume}))

    def _settled(self) -> bool:
        """No replica is in the middle of a step (one whose removal failed has no step left)."""
        return all(r.status.settled for r in self.state.replicas if r.replica_id in self._runs)

    async def _shut_down(self) -> None:
        """``serve down``: every replica's cluster removed, then the load balancer stopped."""
        self._stopping = True
        self.state.status = ServiceStatus.SHUTTING_DOWN
        self._publish()
        state = self.state
        state.replicas = [r for r in state.replicas if r.status != ReplicaStatus.PENDING]  # no cluster
        for record in state.replicas:
            if not record.status.failed:
                record.status = ReplicaStatus.SHUTTING_DOWN
        if self._watch is not None:
            self._watch.cancel()
        runs = list(self._runs.values())
        for replica_id in list(self._runs):
            self._stop(replica_id)
        await asyncio.gather(*runs, return_exceptions=True)
        await workflow.execute_activity(
            serve.stop_load_balancer,
            self.state.name,
            task_queue=SHORT_QUEUE,
            start_to_close_timeout=_CALL,
            retry_policy=SHORT_RETRY,
        )
        self.state.load_balancer = None
        self.state.status = ServiceStatus.DOWN
        self._publish()
