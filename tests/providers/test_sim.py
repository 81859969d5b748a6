"""The sim provider through the provider interface: idempotency, the fault plan, preemption."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from skyhop.providers.base import ClusterHandle, NodeStatus, ProvisionRequest
from skyhop.providers.errors import CapacityError, InvalidRequestError, QuotaError, TransientError
from skyhop.providers.runtime.jobs import JobSpec
from skyhop.providers.sim import PlanError, SimCloud, SimProvider, load_plan
from tests.conftest import run
from tests.helpers import wait_for
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


@pytest.mark.parametrize(("spot", "seen"), [(True, NodeStatus.PREEMPTED), (False, NodeStatus.TERMINATED)])
def test_preemption_kills_the_nodes_jobs_and_a_spot_node_reads_preempted(
    catalog: Path, spot: bool, seen: NodeStatus
) -> None:
    cloud = write_plan(catalog, [{"zone": ZONES[1][1], "preempt_after_s": 1.0}])
    provider = SimProvider(cloud)
    request = _request(provider, 1, num_nodes=1).model_copy(update={"use_spot": spot})
    handle = run(provider.launch(request))
    runtime = provider.runtime(handle.head)
    run(runtime.start_job(JobSpec(key="job-1", script="sleep 60")))
    wait_for(lambda: (s := run(runtime.job_state("job-1"))) is not None and s.status == "RUNNING", 10, "job")
    state = run(runtime.job_state("job-1"))
    assert state is not None
    wait_for(lambda: run(provider.node_statuses(handle)) == [seen], 30, f"the node to read {seen}")
    wait_for(lambda: not Path(handle.head.runtime_dir).exists(), 30, "the preempted node's folder to go")


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
