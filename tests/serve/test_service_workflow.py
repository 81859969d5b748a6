"""``ServiceWorkflow`` on the time-skipping server, its activities replaced by a fake fleet: the
autoscaler's delays, a rolling update, a failed replica's replacement, continue-as-new and down.

One service goes through all of it (each step's timers are skipped: hours of service time take
seconds). The fake fleet's replicas are records; which of them answer their probe is the test's say.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio import activity
from temporalio.client import Client, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from skyhop.activities import planning
from skyhop.activities.cluster_ops import ProbeResult
from skyhop.activities.models import RunJobInput
from skyhop.activities.provisioning import AttemptOutcome
from skyhop.activities.serve import HeldWatch, LoadBalancerSync, ProbeAnswer, ReplicaPortInput, ReplicaProbe
from skyhop.contract import LONG_QUEUE, SHORT_QUEUE, WORKFLOW_QUEUE, WorkflowType, host_queue
from skyhop.contract.serve import (
    ROLLBACK_AFTER,
    LoadBalancerInfo,
    LoadBalancerStats,
    ReplicaStatus,
    ServiceOperation,
    ServiceQuery,
    ServiceRequest,
    ServiceState,
    ServiceStatus,
    ServiceVersionAccepted,
    ServiceVersionRequest,
    UpdateMode,
    service_workflow_id,
)
from skyhop.providers.base import ClusterHandle, LocalAccess, NodeHandle, NodeStatus, ProvisionRequest
from skyhop.providers.home import host_id
from skyhop.spec import Task
from skyhop.workflows.runner import TaskBoundRunner
from skyhop.workflows.service import AUTOSCALE_EVERY, ServiceWorkflow
from tests.cluster.fakes import register_search_attributes
from tests.conftest import run
from tests.managed_jobs.support import every_run_events

TEST_SERVER = str(Path(sys.executable).parent / "temporal-test-server")


def _task(run_command: str, resources: dict[str, object] | None = None, **policy: object) -> Task:
    service = {
        "readiness_probe": {
            "path": "/health",
            "initial_delay_seconds": 600,
            "endpoint_probe_interval_seconds": 60,
        },
        "replica_policy": {
            "min_replicas": 1,
            "max_replicas": 3,
            "target_qps_per_replica": 1,
            "upscale_delay_seconds": 300,
            "downscale_delay_seconds": 600,
            **policy,
        },
    }
    resources = resources or {"infra": "local"}
    return Task.model_validate({"run": run_command, "resources": resources, "service": service})


class FakeFleet:
    """The clusters, the load balancer and the load, as the activities report them."""

    def __init__(self) -> None:
        self.up: set[str] = set()
        self.most_up = 0
        """The most clusters up at once."""
        self.runs: dict[str, str] = {}
        """Each cluster's run command."""
        self.broken_runs: set[str] = set()
        """Run commands that end at once (a bad release)."""
        self.spot: dict[str, bool] = {}
        """Whether each cluster was asked for spot."""
        self.not_answering: set[str] = set()
        self.run_ended: set[str] = set()
        self.preempted: set[str] = set()
        """Clusters whose nodes the provider says were taken back."""
        self.provider_asked: list[str] = []
        self.hold_removals = False
        """While set, a cluster's removal waits (heartbeating): a failed replica stays listed."""
        self.pushes: list[list[int]] = []
        self.window_requests = 0
        self.held = 0
        """Requests the load balancer holds for want of a READY replica."""
        self.load_balancer_running = False

    def activities(self) -> tuple[list[Callable[..., Any]], list[Callable[..., Any]]]:
        @activity.defn(name="provision_attempt")
        async def provision_attempt(request: ProvisionRequest) -> AttemptOutcome:
            self.up.add(request.cluster_name)
            self.most_up = max(self.most_up, len(self.up))
            self.spot[request.cluster_name] = request.use_spot
            node = NodeHandle(
                rank=0,
                instance_id=request.cluster_name,
                ip="10.0.0.1",
                runtime_dir="/none",
                access=LocalAccess(),
            )
            handle = ClusterHandle(cluster_name=request.cluster_name, offering=request.offering, nodes=[node])
            return AttemptOutcome(handle=handle)

        @activity.defn(name="terminate")
        async def terminate(handle: ClusterHandle) -> None:
            while self.hold_removals:
                activity.heartbeat()
                await asyncio.sleep(0.05)
            self.up.discard(handle.cluster_name)

        @activity.defn(name="start_job")
        async def start_job(request: RunJobInput) -> None:
            assert request.task.envs["SKYHOP_SERVE_PORT"] == "8080"
            self.runs[request.handle.cluster_name] = request.task.run or ""

        @activity.defn(name="sync_load_balancer")
        async def sync_load_balancer(request: LoadBalancerSync) -> LoadBalancerInfo:
            self.load_balancer_running = True
            self.pushes.append(sorted(r.replica_id for r in request.replicas))
            return LoadBalancerInfo(pid=1, host="127.0.0.1", port=30000, control_port=30001, log="/dev/null")

        @activity.defn(name="load_balancer_stats")
        async def load_balancer_stats(service: str) -> LoadBalancerStats | None:
            return LoadBalancerStats(
                window_seconds=60, window_requests=self.window_requests, held=0, replicas=[], generation=1
            )

        @activity.defn(name="watch_for_held")
        async def watch_for_held(service: str) -> HeldWatch:
            for _ in range(40):
                if self.held:
                    return HeldWatch.HELD
                activity.heartbeat()
                await asyncio.sleep(0.05)
            return HeldWatch.QUIET

        @activity.defn(name="stop_load_balancer")
        async def stop_load_balancer(service: str) -> None:
            self.load_balancer_running = False

        @activity.defn(name="choose_replica_port")
        async def choose_replica_port(request: ReplicaPortInput) -> int:
            return request.wanted

        @activity.defn(name="probe_replica")
        async def probe_replica(request: ReplicaProbe) -> ProbeAnswer:
            name = request.handle.cluster_name
            if name in self.run_ended or self.runs.get(name) in self.broken_runs:
                return ProbeAnswer(ready=False, ended=True, message="its run ended FAILED with exit code 1")
            if name in self.not_answering:
                return ProbeAnswer(ready=False, message="/health: connection refused")
            return ProbeAnswer(ready=True, message="200 from /health")

        @activity.defn(name="probe_cluster")
        async def probe_cluster(handle: ClusterHandle) -> ProbeResult:
            self.provider_asked.append(handle.cluster_name)
            gone = handle.cluster_name in self.preempted
            return ProbeResult(statuses=[NodeStatus.PREEMPTED if gone else NodeStatus.UP])

        long: list[Callable[..., Any]] = [provision_attempt, terminate, start_job, watch_for_held]
        short: list[Callable[..., Any]] = [
            sync_load_balancer,
            load_balancer_stats,
            stop_load_balancer,
            choose_replica_port,
            probe_replica,
            probe_cluster,
        ]
        return long, short


@asynccontextmanager
async def service_env(fleet: FakeFleet) -> AsyncIterator[tuple[WorkflowEnvironment, Client]]:
    async with await WorkflowEnvironment.start_time_skipping(
        data_converter=pydantic_data_converter, test_server_existing_path=TEST_SERVER
    ) as env:
        await register_search_attributes(env.client)
        long, short = fleet.activities()
        workers = [
            Worker(
                env.client,
                task_queue=WORKFLOW_QUEUE,
                workflows=[ServiceWorkflow],
                activities=[planning.optimize],
                workflow_runner=TaskBoundRunner(),
            ),
            # Replicas on ``local`` run their activities on this machine's queues, as a worker polls.
            *(
                Worker(env.client, task_queue=q, activities=long)
                for q in (LONG_QUEUE, host_queue(LONG_QUEUE, host_id()))
            ),
            *(
                Worker(env.client, task_queue=q, activities=short)
                for q in (SHORT_QUEUE, host_queue(SHORT_QUEUE, host_id()))
            ),
        ]
        for worker in workers:
            await worker.__aenter__()
        try:
            yield env, env.client
        finally:
            for worker in workers:
                await worker.__aexit__(None, None, None)


async def _skip(env: WorkflowEnvironment, duration: timedelta) -> None:
    """Skip ``duration`` of the time-skipping server's time a minute per call at most: one call that
    skips many minutes of probes and replica work outlived its RPC deadline on a loaded machine."""
    left = duration
    while left > timedelta(0):
        step = min(left, timedelta(minutes=1))
        await env.sleep(step)
        left -= step


async def _state(handle: WorkflowHandle[object, ServiceState]) -> ServiceState:
    state: ServiceState = await handle.query(ServiceQuery.STATE, result_type=ServiceState)
    return state


async def _until(
    handle: WorkflowHandle[object, ServiceState], test: Callable[[ServiceState], bool], what: str
) -> ServiceState:
    for _ in range(600):
        state = await _state(handle)
        if test(state):
            return state
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}: {state}")


async def _until_skipping(
    env: WorkflowEnvironment,
    handle: WorkflowHandle[object, ServiceState],
    test: Callable[[ServiceState], bool],
    what: str,
) -> ServiceState:
    """Like ``_until``, skipping 10 s of workflow time between looks (for what takes timers)."""
    for _ in range(600):
        state = await _state(handle)
        if test(state):
            return state
        await _skip(env, timedelta(seconds=10))
    raise AssertionError(f"timed out waiting for {what}: {state}")


async def _start_service(client: Client, task: Task) -> WorkflowHandle[object, ServiceState]:
    request = ServiceRequest(name="svc", task=task, user="tester")
    return await client.start_workflow(
        WorkflowType.SERVICE,
        request,
        id=service_workflow_id("svc"),
        task_queue=WORKFLOW_QUEUE,
        result_type=ServiceState,
    )


async def _update(
    handle: WorkflowHandle[object, ServiceState], task: Task, mode: UpdateMode = UpdateMode.ROLLING
) -> int:
    accepted = await handle.execute_update(
        ServiceOperation.UPDATE_VERSION,
        ServiceVersionRequest(task=task, mode=mode),
        result_type=ServiceVersionAccepted,
    )
    return accepted.version


async def _down(handle: WorkflowHandle[object, ServiceState], fleet: FakeFleet) -> None:
    await handle.cancel()
    final = await handle.result()
    assert final.status == ServiceStatus.DOWN and final.replicas == [] and final.load_balancer is None
    assert fleet.up == set() and not fleet.load_balancer_running


def _ready(state: ServiceState) -> list[int]:
    return [r.replica_id for r in state.replicas if r.status == ReplicaStatus.READY]


_ACTIVITY_ENDS = (
    "activity_task_completed_event_attributes",
    "activity_task_failed_event_attributes",
    "activity_task_timed_out_event_attributes",
    "activity_task_canceled_event_attributes",
)


async def _left_running_at_each_continue(client: Client, workflow_id: str) -> list[list[str]]:
    """For each run that continued as new, the activities it scheduled and did not see end."""
    left: list[list[str]] = []
    running: dict[int, str] = {}
    for event in await every_run_events(client, workflow_id):
        if event.HasField("workflow_execution_started_event_attributes"):
            running = {}  # event ids start again with each run
        elif event.HasField("activity_task_scheduled_event_attributes"):
            running[event.event_id] = event.activity_task_scheduled_event_attributes.activity_type.name
        elif event.HasField("workflow_execution_continued_as_new_event_attributes"):
            left.append(sorted(running.values()))
        for end in _ACTIVITY_ENDS:
            if event.HasField(end):
                running.pop(getattr(event, end).scheduled_event_id, None)
    return left


def test_autoscaling_update_replacement_and_down() -> None:
    fleet = FakeFleet()

    async def scenario() -> None:
        async with service_env(fleet) as (env, client):
            request = ServiceRequest(name="svc", task=_task("serve v1"), user="tester", history_limit=150)
            handle: WorkflowHandle[object, ServiceState] = await client.start_workflow(
                WorkflowType.SERVICE,
                request,
                id=service_workflow_id("svc"),
                task_queue=WORKFLOW_QUEUE,
                result_type=ServiceState,
            )
            first_run = (await handle.describe()).run_id
            # The service reads READY once the load balancer was told, a moment after the replica.
            state = await _until(
                handle, lambda s: _ready(s) == [1] and s.status == ServiceStatus.READY, "replica 1 READY"
            )
            assert state.endpoint == "http://127.0.0.1:30000"
            assert fleet.pushes[0] == [] and fleet.pushes[-1] == [1]

            # 3 QPS for a replica that takes 1: up to 3 (max_replicas), only after the upscale delay.
            fleet.window_requests = 180
            await _skip(env, timedelta(seconds=200))
            assert (await _state(handle)).target == 1
            await _skip(env, timedelta(seconds=160))
            state = await _until(handle, lambda s: _ready(s) == [1, 2, 3], "three READY replicas")
            assert state.target == 3

            # 1 QPS: back to 1 once the downscale delay passed, the first replica kept.
            fleet.window_requests = 60
            await _skip(env, timedelta(seconds=400))
            assert (await _state(handle)).target == 3
            await _skip(env, timedelta(seconds=300))
            state = await _until(handle, lambda s: [r.replica_id for r in s.replicas] == [1], "scaled to 1")
            assert fleet.up == {"svc-replica-1"}

            # A rolling update: the old replica serves until the new one is READY.
            fleet.not_answering.add("svc-replica-4")
            accepted = await handle.execute_update(
                ServiceOperation.UPDATE_VERSION,
                ServiceVersionRequest(task=_task("serve v2")),
                result_type=ServiceVersionAccepted,
            )
            assert accepted.version == 2
            state = await _until(
                handle,
                lambda s: [r.status for r in s.replicas][-1:] == [ReplicaStatus.STARTING],
                "v2 starting",
            )
            await _skip(env, timedelta(seconds=130))
            state = await _state(handle)
            assert _ready(state) == [1] and [r.version for r in state.replicas] == [1, 2]
            fleet.not_answering.clear()
            await _skip(env, timedelta(seconds=70))
            state = await _until(handle, lambda s: [r.replica_id for r in s.replicas] == [4], "v1 gone")
            assert _ready(state) == [4] and state.replicas[0].version == 2
            updating = fleet.pushes[fleet.pushes.index([1]) :]
            assert all(updating), f"a push left no replica: {updating}"

            # Its run ends: replaced by a new replica.
            fleet.run_ended.add("svc-replica-4")
            await _skip(env, timedelta(seconds=70))
            state = await _until(handle, lambda s: _ready(s) == [5], "replica 5 replacing 4")
            assert state.replaced == 1 and "svc-replica-4" not in fleet.up

            # Probes later, the history has continued as new, carrying the service.
            began = (await handle.describe()).run_id
            for _ in range(10):  # a minute per call: one skipping ten outlived its RPC deadline in CI
                await _skip(env, timedelta(minutes=1))
                if (await handle.describe()).run_id != began:
                    break
            assert (await handle.describe()).run_id != began
            assert (await handle.describe()).run_id != first_run
            # Each run continued as new between probes: one left running would be abandoned, and
            # would stop this server's time skipping for good (a one-minute skip then takes a minute).
            left = await _left_running_at_each_continue(client, handle.id)
            assert left and all(activities == [] for activities in left), left
            state = await _until(handle, lambda s: _ready(s) == [5], "the carried replica READY")
            assert state.version == 2 and state.replaced == 1

            await _down(handle, fleet)
            # The replicas stopped between probes (scaled down, updated, replaced, down) left their
            # timers to fire: a cancel that races a fire wedges the time-skipping server's clock.
            events = await every_run_events(client, handle.id)
            assert [e for e in events if e.HasField("timer_started_event_attributes")]
            assert not [e for e in events if e.HasField("timer_canceled_event_attributes")]

    run(scenario())


def test_at_zero_replicas_a_held_request_launches_one_without_waiting_for_a_tick() -> None:
    fleet = FakeFleet()

    async def scenario() -> None:
        async with service_env(fleet) as (env, client):
            handle = await _start_service(client, _task("serve v1", min_replicas=0, max_replicas=1))
            state = await _until(handle, lambda s: s.load_balancer is not None, "the load balancer")
            assert state.target == 0 and state.replicas == [] and fleet.up == set()

            async def serve_then_idle(replica_id: int) -> ServiceState:
                """A request held, served by a new replica; then no traffic, back to zero."""
                fleet.held = fleet.window_requests = 1
                # READY shows in a query a moment before the load balancer's push completes.
                state = await _until(
                    handle,
                    lambda s: _ready(s) == [replica_id] and fleet.pushes[-1:] == [[replica_id]],
                    "a READY replica pushed to the load balancer",
                )
                assert state.target == 1
                fleet.held = fleet.window_requests = 0
                await _until_skipping(env, handle, lambda s: s.replicas == [], "scaled to zero")
                assert fleet.up == set() and fleet.pushes[-1] == []
                return state

            # No time is skipped while it launches: it came before the autoscaler's first tick.
            first = await serve_then_idle(1)
            assert first.replicas[0].launched_at - first.started_at < AUTOSCALE_EVERY.total_seconds()
            await serve_then_idle(2)  # and again, from zero
            await _down(handle, fleet)

    run(scenario())


def test_a_failed_update_rolls_back_by_itself_and_says_so() -> None:
    fleet = FakeFleet()
    fleet.broken_runs.add("serve v2")

    async def scenario() -> None:
        async with service_env(fleet) as (env, client):
            handle = await _start_service(client, _task("serve v1", max_replicas=2))
            await _until(handle, lambda s: _ready(s) == [1] and s.status == ServiceStatus.READY, "v1 READY")
            served_from = len(fleet.pushes) - 1

            assert await _update(handle, _task("serve v2", max_replicas=2)) == 2
            state = await _until_skipping(env, handle, lambda s: s.update_message is not None, "the rollback")
            assert state.version == 1 and state.update is None
            assert state.update_message is not None
            assert state.update_message.startswith(
                f"the update to version 2 was rolled back to version 1: {ROLLBACK_AFTER} of its replicas "
                "failed before they were READY (the last: its run ended FAILED with exit code 1)"
            ), state.update_message
            state = await _until(handle, lambda s: [r.replica_id for r in s.replicas] == [1], "v2 gone")
            assert _ready(state) == [1] and fleet.up == {"svc-replica-1"}
            # Version 1's replica served throughout, and max_replicas (2) held.
            assert all(push == [1] for push in fleet.pushes[served_from:]), fleet.pushes
            assert fleet.most_up == 2

            # The next update takes the next number: 2 was given to the rolled-back one.
            assert await _update(handle, _task("serve v3", max_replicas=2)) == 3
            state = await _until_skipping(
                env,
                handle,
                lambda s: s.update is None and [r.version for r in s.replicas] == [3],
                "v3 serving",
            )
            assert state.update_message is None and _ready(state) != []
            assert all(fleet.pushes[served_from:]) and fleet.most_up == 2
            await _down(handle, fleet)

    run(scenario())


def test_a_blue_green_update_switches_traffic_in_one_push() -> None:
    fleet = FakeFleet()

    async def scenario() -> None:
        async with service_env(fleet) as (env, client):
            handle = await _start_service(client, _task("serve v1", min_replicas=2, max_replicas=4))
            await _until(handle, lambda s: fleet.pushes[-1:] == [[1, 2]], "v1's two replicas pushed")
            served_from = len(fleet.pushes) - 1

            # Room for one set only (2 x 2 > 3): refused, nothing changes.
            with pytest.raises(WorkflowUpdateFailedError) as refused:
                await _update(
                    handle, _task("serve v2", min_replicas=2, max_replicas=3), UpdateMode.BLUE_GREEN
                )
            assert "max_replicas (3); use --mode rolling" in str(refused.value.cause)
            assert (await _state(handle)).version == 1

            # The new set comes up; one of it READY is not sent traffic until both are.
            fleet.not_answering.add("svc-replica-4")
            v2 = _task("serve v2", min_replicas=2, max_replicas=4)
            assert await _update(handle, v2, UpdateMode.BLUE_GREEN) == 2
            await _until_skipping(env, handle, lambda s: _ready(s) == [1, 2, 3], "v2's first replica READY")
            await _skip(env, timedelta(seconds=120))
            assert all(push == [1, 2] for push in fleet.pushes[served_from:]), fleet.pushes
            fleet.not_answering.clear()
            # The update ends as the new set is READY, and its push follows (an activity): a state
            # read between the two, on a busy machine, saw the update over before the push.
            state = await _until_skipping(
                env, handle, lambda s: s.update is None and fleet.pushes[-1:] == [[3, 4]], "the switch"
            )
            assert fleet.pushes[served_from:] == [[1, 2], [3, 4]], fleet.pushes
            state = await _until(handle, lambda s: [r.replica_id for r in s.replicas] == [3, 4], "v1 gone")
            assert _ready(state) == [3, 4] and state.version == 2 and fleet.most_up == 4
            await _down(handle, fleet)

    run(scenario())


def test_spot_replicas_with_on_demand_fallback() -> None:
    fleet = FakeFleet()
    spot = {"infra": "aws/us-east-1", "instance_type": "m6i.large", "use_spot": True}
    fallback = {"base_ondemand_fallback_replicas": 1, "dynamic_ondemand_fallback": True}
    task = _task("serve", spot, min_replicas=2, max_replicas=4, **fallback)

    async def scenario() -> None:
        async with service_env(fleet) as (env, client):
            handle = await _start_service(client, task)
            # Two replicas: one on-demand (the base), one spot, and while the spot one is not READY
            # an on-demand one covering for it.
            fleet.not_answering.add("svc-replica-3")
            state = await _until(handle, lambda s: _ready(s) == [1, 2], "the on-demand replicas READY")
            assert (state.target, state.ondemand_target) == (3, 2)
            assert fleet.spot == {"svc-replica-1": False, "svc-replica-2": False, "svc-replica-3": True}
            # The spot one is READY: at the next tick the cover goes, the base on-demand one stays.
            fleet.not_answering.clear()
            state = await _until_skipping(
                env, handle, lambda s: [r.replica_id for r in s.replicas] == [1, 3], "the cover gone"
            )
            assert (state.target, state.ondemand_target) == (2, 1)
            assert [r.use_spot for r in state.replicas] == [False, True] and fleet.most_up == 3
            await _down(handle, fleet)

    run(scenario())


def _statuses(state: ServiceState) -> dict[int, ReplicaStatus]:
    return {r.replica_id: r.status for r in state.replicas}


def test_a_replica_never_ready_fails_its_initial_delay() -> None:
    fleet = FakeFleet()
    fleet.not_answering.add("svc-replica-1")

    async def scenario() -> None:
        async with service_env(fleet) as (env, client):
            handle = await _start_service(client, _task("serve"))
            await _until(handle, lambda s: _statuses(s) == {1: ReplicaStatus.STARTING}, "replica 1 STARTING")
            fleet.hold_removals = True
            state = await _until_skipping(
                env, handle, lambda s: 1 not in _statuses(s) or _statuses(s)[1].failed, "replica 1 failed"
            )
            assert state.replicas[0].status == ReplicaStatus.FAILED_INITIAL_DELAY, state.replicas
            assert (state.replicas[0].message or "").startswith(
                "not ready within initial_delay_seconds (600)"
            )
            assert fleet.provider_asked == ["svc-replica-1"]  # asked once, before saying why
            fleet.hold_removals = False
            state = await _until(handle, lambda s: _statuses(s) == {2: ReplicaStatus.READY}, "only 2, READY")
            assert state.replaced == 1 and state.failed_starts == 1 and "svc-replica-1" not in fleet.up
            await _down(handle, fleet)

    run(scenario())


def test_replicas_waiting_for_the_relaunch_back_off_are_pending() -> None:
    fleet = FakeFleet()
    fleet.broken_runs.add("serve")

    async def scenario() -> None:
        async with service_env(fleet) as (env, client):
            handle = await _start_service(client, _task("serve"))
            # Runs that end at once: after two, the next replica waits its turn, listed PENDING.
            state = await _until(
                handle, lambda s: ReplicaStatus.PENDING in _statuses(s).values(), "a PENDING replica"
            )
            assert state.failed_starts >= 1 and state.relaunch_at is not None
            pending = next(r for r in state.replicas if r.status == ReplicaStatus.PENDING)
            assert pending.handle is None and pending.cluster_name not in fleet.spot
            fleet.broken_runs.clear()
            state = await _until_skipping(
                env, handle, lambda s: _ready(s) == [pending.replica_id], "it READY"
            )
            assert state.relaunch_at is None
            await _down(handle, fleet)

    run(scenario())


def test_a_ready_replica_failing_its_probe_too_long_fails_probing() -> None:
    fleet = FakeFleet()

    async def scenario() -> None:
        async with service_env(fleet) as (env, client):
            handle = await _start_service(client, _task("serve"))
            await _until(handle, lambda s: _ready(s) == [1], "replica 1 READY")
            fleet.not_answering.add("svc-replica-1")
            fleet.hold_removals = True
            state = await _until_skipping(
                env, handle, lambda s: _statuses(s).get(1) == ReplicaStatus.NOT_READY, "replica 1 NOT_READY"
            )
            assert state.replicas[0].message == "/health: connection refused"
            state = await _until_skipping(
                env, handle, lambda s: _statuses(s).get(1) != ReplicaStatus.NOT_READY, "replica 1 failed"
            )
            assert state.replicas[0].status == ReplicaStatus.FAILED_PROBING, state.replicas
            assert (state.replicas[0].message or "").startswith(
                "not ready for 180 s (consecutive_failure_threshold_timeout)"
            )
            # Up, so not preempted: asked when it first failed and before it was declared failed.
            assert fleet.provider_asked == ["svc-replica-1", "svc-replica-1"]
            fleet.hold_removals = False
            # It was READY once: its replacement is launched at once, no back-off.
            state = await _until(handle, lambda s: _statuses(s) == {2: ReplicaStatus.READY}, "only 2, READY")
            assert state.replaced == 1 and state.failed_starts == 0 and "svc-replica-1" not in fleet.up
            await _down(handle, fleet)

    run(scenario())


def test_a_replica_whose_nodes_the_provider_took_back_is_preempted_and_replaced() -> None:
    fleet = FakeFleet()

    async def scenario() -> None:
        async with service_env(fleet) as (env, client):
            handle = await _start_service(client, _task("serve", min_replicas=2))
            await _until(handle, lambda s: _ready(s) == [1, 2], "two READY replicas")
            # Replica 1's probe fails and the provider says its node is gone; replica 2's run ends,
            # its node still UP: a plain failure.
            fleet.preempted.add("svc-replica-1")
            fleet.not_answering.add("svc-replica-1")
            fleet.run_ended.add("svc-replica-2")
            fleet.hold_removals = True
            state = await _until_skipping(
                env, handle, lambda s: all(r.status.failed for r in s.replicas[:2]), "both failed"
            )
            statuses = _statuses(state)
            assert (statuses[1], statuses[2]) == (ReplicaStatus.PREEMPTED, ReplicaStatus.FAILED)
            assert state.replicas[0].message == "node 0 was preempted: /health: connection refused"
            assert state.replicas[1].message == "its run ended FAILED with exit code 1"
            fleet.hold_removals = False
            state = await _until(handle, lambda s: _ready(s) == [3, 4], "both replaced")
            assert state.replaced == 2 and fleet.up == {"svc-replica-3", "svc-replica-4"}
            await _down(handle, fleet)

    run(scenario())
