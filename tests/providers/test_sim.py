"""The sim provider through the provider interface: idempotency, the fault plan, preemption."""

from __future__ import annotations

import fcntl
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from skyhop.providers.base import ClusterHandle, NodeStatus, ProvisionRequest
from skyhop.providers.errors import CapacityError, InvalidRequestError, QuotaError, TransientError
from skyhop.providers.runtime import node_runner
from skyhop.providers.runtime.jobs import JobSpec
from skyhop.providers.sim import PlanError, SimCloud, SimProvider, load_plan
from tests.conftest import run
from tests.helpers import group_members, wait_for
from tests.providers.sim_support import ZONES, write_catalog, write_plan


@pytest.fixture
def catalog(tmp_path: Path) -> Iterator[Path]:
    yield write_catalog(tmp_path / "catalog.csv")
    cloud = SimCloud()
    cloud.plan_path.unlink(missing_ok=True)
    cloud.terminate([i["instance_id"] for i in cloud.describe()])


def _request(
    provider: SimProvider, zone_index: int, num_nodes: int = 2, cluster: str = "c1"
) -> ProvisionRequest:
    region, zone = ZONES[zone_index]
    offering = next(o for o in provider.offerings() if o.zone == zone)
    assert offering.region == region
    return ProvisionRequest(cluster_name=cluster, offering=offering, num_nodes=num_nodes)


def _count(cloud: SimCloud, cluster: str = "c1") -> int:
    return len(cloud.describe(cluster))


def test_offerings_are_built_once_per_catalog_version(catalog: Path) -> None:
    """Each optimization reads the offerings; they follow an edited catalog and are the caller's own."""
    write_plan(catalog, [])
    provider = SimProvider()
    first = provider.offerings()
    first.clear()  # a caller's list: the next caller's is whole
    assert len(provider.offerings()) == len(ZONES)
    write_catalog(catalog, ZONES[:3])
    assert {o.zone for o in provider.offerings()} == {zone for _, zone in ZONES[:3]}


def test_offerings_come_from_the_plans_catalog(catalog: Path) -> None:
    write_plan(catalog, [])
    offerings = SimProvider().offerings()
    assert len(offerings) == len(ZONES)
    assert {o.provider for o in offerings} == {"sim"}
    cheapest = min(offerings, key=lambda o: o.price)
    assert (cheapest.region, cheapest.zone, cheapest.instance_type) == (
        "us-east-1",
        "us-east-1a",
        "m6i.large",
    )


def test_launch_is_idempotent_by_cluster_and_rank(catalog: Path) -> None:
    cloud = write_plan(catalog, [])
    provider = SimProvider(cloud)
    request = _request(provider, 0)
    first = run(provider.launch(request))
    again = run(provider.launch(request))
    assert [n.instance_id for n in first.nodes] == [n.instance_id for n in again.nodes]
    assert [n.rank for n in first.nodes] == [0, 1]
    assert _count(cloud) == 2
    assert all((Path(n.runtime_dir) / "node_runner.py").exists() for n in first.nodes)
    run(provider.terminate(first))
    assert _count(cloud) == 0
    assert not any(Path(n.runtime_dir).exists() for n in first.nodes)


def test_fault_plan_fails_the_first_attempts_then_succeeds(catalog: Path) -> None:
    zone = ZONES[0][1]
    cloud = write_plan(catalog, [{"zone": zone, "error": "capacity", "attempts": 2}])
    provider = SimProvider(cloud)
    request = _request(provider, 0)
    for _ in range(2):
        with pytest.raises(CapacityError) as failed:
            run(provider.launch(request))
        assert failed.value.code == "InsufficientInstanceCapacity"
        assert failed.value.leftover is False
    handle = run(provider.launch(request))
    assert len(handle.nodes) == 2 and _count(cloud) == 2


def test_partial_multi_node_failure_leaves_nodes_for_compensation(catalog: Path) -> None:
    region = ZONES[0][0]
    cloud = write_plan(
        catalog, [{"region": region, "error": "quota", "code": "VcpuLimitExceeded", "after_nodes": 1}]
    )
    provider = SimProvider(cloud)
    request = _request(provider, 0, num_nodes=3)
    with pytest.raises(QuotaError) as failed:
        run(provider.launch(request))
    assert failed.value.code == "VcpuLimitExceeded" and failed.value.leftover is True
    assert _count(cloud) == 1
    run(provider.terminate(ClusterHandle(cluster_name="c1", offering=request.offering, nodes=[])))
    assert _count(cloud) == 0


def test_a_describe_fault_fails_listing_instances_in_its_region(catalog: Path) -> None:
    cloud = write_plan(catalog, [])
    provider = SimProvider(cloud)
    handle = run(provider.launch(_request(provider, 0, num_nodes=1)))
    write_plan(catalog, [{"region": ZONES[0][0], "call": "describe", "error": "transient", "attempts": 2}])
    for _ in range(2):
        with pytest.raises(TransientError) as failed:
            run(provider.node_statuses(handle))
        assert failed.value.code == "RequestLimitExceeded"
    assert run(provider.node_statuses(handle)) == [NodeStatus.UP]
    run(provider.terminate(handle))


def _instances_on_file(cloud: SimCloud) -> dict[str, dict[str, Any]]:
    """The cloud's instances as its clusters' state files hold them, read without an API call (which
    would apply a due preemption itself)."""
    items: dict[str, dict[str, Any]] = {}
    for path in (cloud.root / "clusters").glob("*.json"):
        items.update(json.loads(path.read_text()))
    return items


def _timer_groups(cloud: SimCloud) -> list[int]:
    return [i["timer"] for i in _instances_on_file(cloud).values() if i.get("timer") is not None]


@pytest.mark.parametrize(("spot", "seen"), [(True, NodeStatus.PREEMPTED), (False, NodeStatus.TERMINATED)])
def test_a_preemption_kills_the_nodes_jobs_at_its_time_with_no_api_call(
    catalog: Path, spot: bool, seen: NodeStatus
) -> None:
    cloud = write_plan(catalog, [{"zone": ZONES[1][1], "preempt_after_s": 1.0}])
    provider = SimProvider(cloud)
    request = _request(provider, 1, num_nodes=1).model_copy(update={"use_spot": spot})
    handle = run(provider.launch(request))
    (timer,) = _timer_groups(cloud)
    runtime = provider.runtime(handle.head)
    run(runtime.start_job(JobSpec(key="job-1", script="sleep 60")))
    wait_for(lambda: (s := run(runtime.job_state("job-1"))) is not None and s.status == "RUNNING", 10, "job")
    state = node_runner.read_state(handle.head.runtime_dir, "job-1")
    assert state is not None
    instance_id = handle.head.instance_id
    wait_for(lambda: _instances_on_file(cloud)[instance_id].get("preempted"), 30, "the timer to preempt")
    wait_for(lambda: not group_members(state["pid"]), 30, "the preempted node's job to die")
    assert not Path(handle.head.runtime_dir).exists()
    wait_for(lambda: not group_members(timer), 30, "the fired timer to end")
    assert run(provider.node_statuses(handle)) == [seen]
    assert cloud.describe("c1") == []


def test_node_and_launches_choose_which_instances_are_preempted(catalog: Path) -> None:
    rule = {"zone": ZONES[1][1], "preempt_after_s": 600.0, "node": 1, "launches": [1, 3]}
    cloud = write_plan(catalog, [rule])
    provider = SimProvider(cloud)
    request = _request(provider, 1, num_nodes=2)

    def armed() -> list[int]:
        return sorted(i["rank"] for i in cloud.describe("c1") if i["preempt_at"] is not None)

    timers = []
    handle = run(provider.launch(request))  # launch 1: rank 1 only
    assert armed() == [1]
    timers += _timer_groups(cloud)
    assert all(group_members(t) for t in timers)
    cloud.terminate([handle.nodes[1].instance_id])  # killed before its time: its timer with it
    run(provider.launch(request))  # launch 2 (re-creates rank 1): not preempted
    assert armed() == []
    run(provider.terminate(handle))
    run(provider.launch(request))  # launch 3: rank 1 again
    assert armed() == [1]
    timers += _timer_groups(cloud)
    run(provider.stop(handle))  # a stopped instance's timer goes; start arms a new one
    run(provider.start(handle))
    timers += _timer_groups(cloud)
    assert len(set(timers)) == 3
    run(provider.terminate(handle))
    wait_for(lambda: not any(group_members(t) for t in timers), 30, "no timer left behind")


def test_schedule_preemption_preempts_a_chosen_instance(catalog: Path) -> None:
    cloud = write_plan(catalog, [])
    provider = SimProvider(cloud)
    handle = run(provider.launch(_request(provider, 0, num_nodes=2).model_copy(update={"use_spot": True})))
    cloud.schedule_preemption([handle.nodes[0].instance_id], 0.5)
    (timer,) = _timer_groups(cloud)
    wait_for(
        lambda: _instances_on_file(cloud)[handle.nodes[0].instance_id].get("preempted"), 30, "preemption"
    )
    wait_for(lambda: not group_members(timer), 30, "the fired timer to end")
    assert run(provider.node_statuses(handle)) == [NodeStatus.PREEMPTED, NodeStatus.UP]


def test_preempt_kills_a_chosen_instances_jobs_before_it_returns_with_no_timer(catalog: Path) -> None:
    """The benchmarks' way to preempt: at once, in the caller's process."""
    cloud = write_plan(catalog, [])
    provider = SimProvider(cloud)
    handle = run(provider.launch(_request(provider, 0, num_nodes=2).model_copy(update={"use_spot": True})))
    ids = [node.instance_id for node in handle.nodes]
    runtime = provider.runtime(handle.head)
    run(runtime.start_job(JobSpec(key="job-1", script="sleep 60")))
    wait_for(lambda: (s := run(runtime.job_state("job-1"))) is not None and s.status == "RUNNING", 10, "job")
    state = node_runner.read_state(handle.head.runtime_dir, "job-1")
    assert state is not None
    before = time.time()
    cloud.preempt([ids[0]])
    at = cloud.preempted_at(ids)
    assert list(at) == [ids[0]] and before <= at[ids[0]] <= time.time()
    assert _timer_groups(cloud) == [] and not Path(handle.head.runtime_dir).exists()
    wait_for(lambda: not group_members(state["pid"]), 30, "the preempted node's job to die")
    cloud.preempt([ids[0]])  # gone already: nothing happens again
    assert cloud.preempted_at(ids) == at
    assert run(provider.node_statuses(handle)) == [NodeStatus.PREEMPTED, NodeStatus.UP]


def test_preempted_at_tells_when_each_preempted_instance_was_killed(catalog: Path) -> None:
    """The public lookup benchmarks use: preempted instances only, never those a call terminated."""
    cloud = write_plan(catalog, [])
    provider = SimProvider(cloud)
    handle = run(provider.launch(_request(provider, 0, num_nodes=3)))
    ids = [node.instance_id for node in handle.nodes]
    scheduled = time.time()
    cloud.schedule_preemption([ids[0]], 0.5)
    cloud.terminate([ids[2]])
    wait_for(lambda: _instances_on_file(cloud)[ids[0]].get("preempted"), 30, "preemption")
    found = cloud.preempted_at(ids)
    assert list(found) == [ids[0]]
    assert scheduled + 0.5 <= found[ids[0]] <= time.time()
    assert cloud.preempted(ids) == {ids[0]}


def test_stop_and_start_keep_the_instances(catalog: Path) -> None:
    cloud = write_plan(catalog, [])
    provider = SimProvider(cloud)
    handle = run(provider.launch(_request(provider, 2)))
    run(provider.stop(handle))
    assert run(provider.node_statuses(handle)) == [NodeStatus.STOPPED] * 2
    started = run(provider.start(handle))
    assert [n.instance_id for n in started.nodes] == [n.instance_id for n in handle.nodes]
    assert run(provider.node_statuses(handle)) == [NodeStatus.UP] * 2
    run(provider.terminate(handle))


def test_a_bad_plan_names_the_field(catalog: Path) -> None:
    cloud = write_plan(catalog, [{"zone": "x", "error": "boom"}])
    with pytest.raises(PlanError, match=r"faults\.0\.error: Input should be 'capacity'"):
        load_plan(cloud.plan_path)
    provider = SimProvider(cloud)
    with pytest.raises(InvalidRequestError, match="faults.0.error"):
        run(provider.list_instances("c1", None))


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ({"node": 1}, r"faults\.0: node and launches choose what is preempted: set preempt_after_s too$"),
        ({"preempt_after_s": 1, "launches": [0]}, r"faults\.0\.launches\.0: Input should be greater than"),
        ({"preempt_after_s": 1, "launches": []}, r"faults\.0\.launches: List should have at least 1 item"),
        ({"preempt_after_s": 1, "node": -1}, r"faults\.0\.node: Input should be greater than or equal to 0"),
    ],
)
def test_a_bad_preemption_rule_is_one_line_naming_the_field(
    catalog: Path, rule: dict[str, Any], message: str
) -> None:
    cloud = write_plan(catalog, [rule])
    with pytest.raises(PlanError, match=message) as failed:
        load_plan(cloud.plan_path)
    assert "\n" not in str(failed.value)


def test_a_firing_timer_loads_no_more_than_the_clouds_state_code() -> None:
    """A timer starts an interpreter per preemption: with pydantic and the provider stack that took
    ~0.4 s of CPU each, which at ten preemptions a second starved the worker being measured."""
    heavy = "{'pydantic', 'yaml', 'temporalio'}"
    probe = f"import sys, skyhop.providers.sim.timer; print(sorted({heavy} & set(sys.modules)))"
    found = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert found.stdout.strip() == "[]"


def test_a_call_on_one_cluster_does_not_wait_for_a_call_on_another(catalog: Path) -> None:
    """At 10,000 instances one state file under one lock made every call 70-130 ms, all in a row:
    a call now locks only the clusters it touches (and the cloud-wide counters, briefly)."""
    cloud = write_plan(catalog, [])
    provider = SimProvider(cloud)
    for name in ("a", "b"):
        run(provider.launch(_request(provider, 0, num_nodes=1, cluster=name)))
    with ThreadPoolExecutor(2) as pool, open(cloud._cluster_path("a").with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a call on cluster a, in the middle of its work
        on_a = pool.submit(cloud.describe, "a")
        assert len(pool.submit(cloud.describe, "b").result(timeout=30)) == 1
        assert not on_a.done()
        fcntl.flock(lock, fcntl.LOCK_UN)
        assert len(on_a.result(timeout=30)) == 1


def test_concurrent_launches_of_many_clusters_get_distinct_instances(catalog: Path) -> None:
    cloud = write_plan(catalog, [{"zone": ZONES[0][1], "error": "capacity", "attempts": 5}])
    region, zone = ZONES[0]

    def launch(index: int) -> int:
        try:
            return cloud.run_instances(f"many-{index}", [0, 1], region, zone, "m6i.large", False)
        except CapacityError:
            return -1

    with ThreadPoolExecutor(8) as pool:
        created = list(pool.map(launch, range(24)))
    assert created.count(-1) == 5 and created.count(2) == 19  # the plan's 5 attempts, cloud-wide
    instances = [i for n in range(24) for i in cloud.describe(f"many-{n}")]
    assert len({i["instance_id"] for i in instances}) == len(instances) == 38
    cloud.terminate([i["instance_id"] for i in instances])
