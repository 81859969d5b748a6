"""``LaunchWorkflow`` on fake activities and the time-skipping server: failover, pins, fatal errors,
compensation on cancel, continue-as-new, the stage search attribute.

Each scenario is a coroutine of the client, so ``record_histories`` records the same ones for the
replay test.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from datetime import timedelta

import pytest
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import ApplicationError, CancelledError

from skyhop.contract import WORKFLOW_QUEUE, ClusterStatus, cluster_workflow_id
from skyhop.contract.clusters import ClusterInput, ClusterRecord, LaunchProgress, LaunchResult, LockHolder
from skyhop.contract.search import STAGE
from skyhop.optimizer.blocklist import Blocked, Blocklist
from skyhop.providers.base import ClusterHandle, NodeHandle, ProvisionRequest
from skyhop.spec import Resources, Task
from skyhop.workflows.cluster import ClusterWorkflow
from skyhop.workflows.launch import LaunchWorkflow
from skyhop.workflows.provisioner import ProvisionSpec
from tests.cluster.fakes import query_status, serving
from tests.cluster.test_autostop import time_skipping
from tests.conftest import run
from tests.launch.fakes import CAPACITY, FATAL, QUOTA, FakeProviders, offering, start_launch
from tests.launch.pinned import PinnedProvisioning

EAST_A = offering("us-east-1", "us-east-1a")
EAST_B = offering("us-east-1", "us-east-1b", price=1.5)
WEST_A = offering("us-west-2", "us-west-2a", price=2.0)
SPOT = Task(resources=Resources(infra="aws", use_spot=True, image_id="ami-spot"))

Launch = WorkflowHandle[LaunchWorkflow, LaunchResult]


async def _eventually(check: Callable[[], Awaitable[bool]], what: str, timeout: float = 60) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


async def _record(client: Client, cluster: str) -> ClusterRecord:
    return await query_status(client.get_workflow_handle(cluster_workflow_id(cluster)))


async def _failure(handle: Launch) -> BaseException:
    with pytest.raises(WorkflowFailureError) as failed:
        await handle.result()
    assert failed.value.cause is not None
    return failed.value.cause


# --- scenarios ------------------------------------------------------------------------------------


async def failover(client: Client, cloud: FakeProviders) -> Launch:
    """A full zone, then a region out of quota, then up elsewhere: each failure blocks its scope."""
    cloud.failures = {EAST_A.location: CAPACITY, EAST_B.location: QUOTA}
    handle = await start_launch(client, "failover", SPOT)
    await handle.result()
    return handle


async def existing_cluster(client: Client, cloud: FakeProviders) -> Launch:
    """A stopped spot cluster with its own image: first its zone is full, then it comes back as it was."""
    kept = ProvisionRequest(
        cluster_name="kept",
        offering=WEST_A,
        use_spot=True,
        image_id="ami-kept",
        disk_size=100,
        ports=["8080"],
        attempt_id="launch:kept:old/1",
    )
    node = NodeHandle(rank=0, instance_id="kept-0", ip="10.0.0.9", runtime_dir="/n")
    record = ClusterRecord(
        name="kept",
        status=ClusterStatus.STOPPED,
        handle=ClusterHandle(cluster_name="kept", offering=WEST_A, use_spot=True, nodes=[node]),
        provision_request=kept,
        ever_up=True,
    )
    await client.start_workflow(
        ClusterWorkflow.run,
        ClusterInput(record=record),
        id=cluster_workflow_id("kept"),
        task_queue=WORKFLOW_QUEUE,
    )
    assert (await _record(client, "kept")).handle is not None  # the cluster has run its first task
    cloud.failures = {WEST_A.location: CAPACITY}
    cause = await _failure(await start_launch(client, "kept", Task()))
    assert isinstance(cause, ApplicationError) and cause.type == "ResourcesUnavailable"
    assert "stays in aws/us-west-2/us-west-2a" in cause.message
    cloud.failures = {}
    handle = await start_launch(client, "kept", Task())
    await handle.result()
    return handle


async def fatal(client: Client, cloud: FakeProviders) -> Launch:
    cloud.failures = {EAST_A.location: FATAL}
    handle = await start_launch(client, "fatal", Task())
    cause = await _failure(handle)
    assert isinstance(cause, ApplicationError) and cause.type == "ProvisionFailed"
    return handle


async def cancelled(client: Client, cloud: FakeProviders) -> Launch:
    """Cancelled while its attempt is running: the attempt stops, then what it made is removed."""
    cloud.hold_attempts = True
    handle = await start_launch(client, "cancelled", Task())

    async def attempting() -> bool:
        return bool(cloud.attempted)

    await _eventually(attempting, "the first attempt")
    await handle.cancel()
    cause = await _failure(handle)
    assert isinstance(cause, CancelledError)
    return handle


async def continue_as_new(client: Client, cloud: FakeProviders) -> Launch:
    """``--retry-until-up`` with every zone full: the launch continues as new between searches."""
    cloud.failures = {o.location: CAPACITY for o in cloud.offerings}
    handle = await start_launch(client, "retry", Task(), retry_until_up=True, history_limit=40)
    first_run = (await handle.describe()).run_id
    result = asyncio.ensure_future(handle.result())  # awaiting a result lets the server skip time

    runs = {first_run}

    async def continued_twice() -> bool:
        runs.add((await handle.describe()).run_id)
        return len(runs) >= 3

    await _eventually(continued_twice, "two continue-as-new")
    record = await _record(client, "retry")
    assert record.holder == LockHolder.launch(handle.id)  # the lock went over to the next run
    cloud.failures = {}
    await result
    return handle


# --- tests --------------------------------------------------------------------------------------------


class Facts:
    """What a scenario left, read while the server was still up."""

    def __init__(self, cloud: FakeProviders, progress: LaunchProgress, record: ClusterRecord) -> None:
        self.cloud, self.progress, self.record = cloud, progress, record


def _play(scenario: Callable[[Client, FakeProviders], Awaitable[Launch]], skip_time: bool = True) -> Facts:
    """Run ``scenario``; without ``skip_time`` the server keeps real time: a cluster with no timer
    would otherwise be skipped to its run timeout while the test awaits a result."""

    async def play() -> Facts:
        async with time_skipping() as env:
            cloud = FakeProviders(env.client, [EAST_A, EAST_B, WEST_A])
            async with serving(env.client, cloud):
                if skip_time:
                    handle = await scenario(env.client, cloud)
                else:
                    with env.auto_time_skipping_disabled():
                        handle = await scenario(env.client, cloud)
                progress = await handle.query(LaunchWorkflow.progress)
                return Facts(cloud, progress, await _record(env.client, handle.id.split(":")[1]))

    return run(play())


def test_failover_blocks_each_scope_removes_what_failed_attempts_left_and_keeps_the_request() -> None:
    facts = _play(failover)
    cloud, progress, record = facts.cloud, facts.progress, facts.record
    assert cloud.attempted == [EAST_A.location, EAST_B.location, WEST_A.location]
    assert [(a.zone, a.blocked) for a in progress.attempts] == [
        ("us-east-1a", "zone"),
        ("us-east-1b", "region"),
    ]
    assert [a.next_location for a in progress.attempts] == [EAST_B.location, WEST_A.location]
    assert [c for c in cloud.calls if c.startswith("terminate")] == [
        f"terminate {EAST_A.location}",
        f"terminate {EAST_B.location}",
    ]
    assert len({r.attempt_id for r in cloud.requests}) == 3
    last = cloud.requests[-1]
    assert (last.use_spot, last.image_id) == (True, "ami-spot")
    assert record.status == ClusterStatus.UP and record.provision_request == last


def test_an_existing_cluster_stays_in_place_and_comes_back_with_the_nodes_it_had() -> None:
    facts = _play(existing_cluster, skip_time=False)
    cloud = facts.cloud
    assert "optimize" not in cloud.calls
    assert cloud.attempted == [WEST_A.location, WEST_A.location]
    assert not [c for c in cloud.calls if c.startswith("terminate")]  # its nodes were up before
    for request in cloud.requests:
        assert (request.use_spot, request.image_id, request.disk_size, request.ports) == (
            True,
            "ami-kept",
            100,
            ["8080"],
        )
    assert cloud.requests[0].attempt_id != cloud.requests[1].attempt_id != "launch:kept:old/1"
    assert facts.record.status == ClusterStatus.UP


def test_a_fatal_failure_ends_the_launch_without_trying_elsewhere() -> None:
    facts = _play(fatal)
    assert facts.cloud.attempted == [EAST_A.location]
    assert facts.progress.stage == "failed"
    assert facts.record.status == ClusterStatus.TERMINATED


def test_a_cancel_during_an_attempt_removes_what_it_created_and_gives_the_lock_back() -> None:
    facts = _play(cancelled)
    assert facts.cloud.attempted == [EAST_A.location]
    assert facts.cloud.calls[-1] == f"terminate {EAST_A.location}"
    record = facts.record
    assert record.holder is None and record.status == ClusterStatus.TERMINATED


def test_retry_until_up_continues_as_new_carrying_attempts_and_the_lock() -> None:
    facts = _play(continue_as_new)
    cloud, progress, record = facts.cloud, facts.progress, facts.record
    failed = len(cloud.attempted) - 1
    assert failed >= 6  # at least two searches over the three offerings
    assert progress.earlier_attempts + len(progress.attempts) == failed
    assert {a.kind for a in progress.attempts} == {"capacity"}
    assert len({r.attempt_id for r in cloud.requests}) == len(cloud.requests)  # unique across runs
    stages = [stage for stage, _ in progress.finished_stages]
    assert stages.count("lock") + progress.earlier_stages >= 1 and progress.stage == "done"
    assert record.status == ClusterStatus.UP and record.holder is None


def test_the_run_a_continue_as_new_started_holds_the_lock_under_a_lease_of_its_own() -> None:
    """Terminated after a continue-as-new, the launch's lock still comes back: its new run's lease
    gives it back. (The time-skipping server does not apply parent close policies: the test
    cancels the lease the way the real server does when its launch closes.)"""

    async def scenario() -> None:
        async with time_skipping() as env:
            cloud = FakeProviders(env.client, [EAST_A, EAST_B])
            cloud.failures = {o.location: CAPACITY for o in cloud.offerings}
            async with serving(env.client, cloud):
                handle = await start_launch(env.client, "gone", Task(), retry_until_up=True, history_limit=40)
                first_run = (await handle.describe()).run_id
                result = asyncio.ensure_future(handle.result())  # awaiting a result lets the server skip time

                async def continued() -> bool:
                    return (await handle.describe()).run_id != first_run

                await _eventually(continued, "a continue-as-new")
                assert (await _record(env.client, "gone")).holder == LockHolder.launch(handle.id)
                leases = [
                    event.start_child_workflow_execution_initiated_event_attributes.workflow_id
                    async for event in handle.fetch_history_events()
                    if event.HasField("start_child_workflow_execution_initiated_event_attributes")
                ]
                assert len(leases) == 1  # the new run's own lease, not a second claim
                await handle.terminate()
                with contextlib.suppress(WorkflowFailureError):
                    await result
                await env.client.get_workflow_handle(leases[0]).cancel()

                async def lock_back() -> bool:
                    return (await _record(env.client, "gone")).holder is None

                await _eventually(lock_back, "the new run's lease to give the lock back")
                assert (await _record(env.client, "gone")).status == ClusterStatus.TERMINATED

    run(scenario())


def test_the_stage_search_attribute_says_lock_while_the_launch_waits_for_its_cluster() -> None:
    async def scenario() -> None:
        async with time_skipping() as env:
            cloud = FakeProviders(env.client, [EAST_A])
            async with serving(env.client, cloud):
                # Someone else holds the cluster: the launch waits for the lock.
                busy = ClusterRecord(name="busy", holder=LockHolder.launch("launch:busy:other"))
                await env.client.start_workflow(
                    ClusterWorkflow.run,
                    ClusterInput(record=busy),
                    id=cluster_workflow_id("busy"),
                    task_queue=WORKFLOW_QUEUE,
                )
                handle = await start_launch(env.client, "busy", Task())

                async def queued() -> bool:
                    return LockHolder.launch(handle.id) in (await _record(env.client, "busy")).waiting

                await _eventually(queued, "the launch to wait for the lock")
                attributes = (await handle.describe()).typed_search_attributes
                assert attributes.get(STAGE) == "lock"
                assert (await handle.query(LaunchWorkflow.progress)).stage == "lock"
                await handle.terminate()

    run(scenario())


class _WithPinned(FakeProviders):
    def workflows(self) -> list[type]:
        return [*super().workflows(), PinnedProvisioning]


def test_provisioner_starts_from_a_blocklist_and_stays_inside_its_pin() -> None:
    async def scenario() -> None:
        async with time_skipping() as env:
            # Cheapest first: the blocked zone, then a region outside the pin, then the answer.
            cloud = _WithPinned(env.client, [EAST_A, WEST_A, EAST_B])
            async with serving(env.client, cloud):
                spec = ProvisionSpec(
                    cluster_name="job",
                    task=Task(),
                    blocklist=Blocklist(entries=[Blocked(provider="aws", zone="us-east-1a")]),
                    pin=Blocked(provider="aws", region="us-east-1"),
                )
                where = await env.client.execute_workflow(
                    PinnedProvisioning.run,
                    spec,
                    id="pinned",
                    task_queue=WORKFLOW_QUEUE,
                    execution_timeout=timedelta(minutes=5),
                )
                assert where == EAST_B.location
                assert cloud.attempted == [EAST_B.location]

    run(scenario())
