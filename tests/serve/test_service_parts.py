"""The service controller's parts: the replica plan (pure), the relaunch backoff, the service
section's checks, and the load balancer activity's one-per-service start."""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from pathlib import Path

import pytest
from temporalio.testing import ActivityEnvironment

from skyhop.activities.serve import (
    HOLD_TIMEOUT_ENV,
    HeldWatch,
    LoadBalancerSync,
    hold_timeout,
    load_balancer_folder,
    load_balancer_stats,
    stop_load_balancer,
    sync_load_balancer,
    watch_for_held,
)
from skyhop.contract.serve import LoadBalancingPolicy, ReplicaRecord, ReplicaStatus, UpdateMode
from skyhop.serve.service_spec import asks_for_spot, autoscaler_policy, check_service, on_demand, replica_port
from skyhop.spec import SpecError, Task
from skyhop.workflows.service import relaunch_delay
from skyhop.workflows.service_plan import plan_replicas, update_done
from tests.conftest import run
from tests.serve.conftest import Replica, get

READY, STARTING, FAILED = ReplicaStatus.READY, ReplicaStatus.STARTING, ReplicaStatus.FAILED
_KINDS = {"launch_ondemand"}
"""Left out where spot plays no part."""


def _replicas(*specs: tuple[int, int, ReplicaStatus]) -> list[ReplicaRecord]:
    return [
        ReplicaRecord(
            replica_id=rid, version=version, status=status, cluster_name=f"s-replica-{rid}", launched_at=0
        )
        for rid, version, status in specs
    ]


def test_a_failed_replica_is_replaced_and_a_scale_down_keeps_the_oldest_ready() -> None:
    plan = plan_replicas(_replicas((1, 1, READY), (2, 1, FAILED)), version=1, target=2, ceiling=3)
    assert (plan.launch, plan.remove) == (1, [])
    plan = plan_replicas(
        _replicas((1, 1, READY), (2, 1, STARTING), (3, 1, READY)), version=1, target=1, ceiling=3
    )
    assert (plan.launch, sorted(plan.remove)) == (0, [2, 3])


def test_a_rolling_update_keeps_the_ready_count_and_surges_by_one() -> None:
    old = [(1, 1, READY), (2, 1, READY)]
    assert plan_replicas(_replicas(*old), version=2, target=2, ceiling=3).model_dump(exclude=_KINDS) == {
        "launch": 1,
        "remove": [],
        "hold": [],
    }
    # The new one is starting: nothing more, nothing less.
    starting = _replicas(*old, (3, 2, STARTING))
    assert plan_replicas(starting, version=2, target=2, ceiling=3).model_dump(exclude=_KINDS) == {
        "launch": 0,
        "remove": [],
        "hold": [],
    }
    # Once it is READY the oldest goes, and the next new one may start.
    one_ready = _replicas(*old, (3, 2, READY))
    assert plan_replicas(one_ready, version=2, target=2, ceiling=3).model_dump(exclude=_KINDS) == {
        "launch": 1,
        "remove": [1],
        "hold": [],
    }
    done = _replicas((2, 1, READY), (3, 2, READY), (4, 2, READY))
    assert plan_replicas(done, version=2, target=2, ceiling=3).model_dump(exclude=_KINDS) == {
        "launch": 0,
        "remove": [2],
        "hold": [],
    }
    # An old replica that serves nothing goes at once (and takes no room from the surge).
    broken = _replicas((1, 1, ReplicaStatus.NOT_READY), (2, 1, READY))
    assert plan_replicas(broken, version=2, target=2, ceiling=3).model_dump(exclude=_KINDS) == {
        "launch": 2,
        "remove": [1],
        "hold": [],
    }


def test_an_update_at_max_replicas_makes_room_one_replica_at_a_time() -> None:
    old = [(1, 1, READY), (2, 1, READY)]
    # No room (target = max_replicas = 2): the oldest goes first, one new one takes its place.
    assert plan_replicas(_replicas(*old), version=2, target=2, ceiling=2).model_dump(exclude=_KINDS) == {
        "launch": 1,
        "remove": [1],
        "hold": [],
    }
    # While it starts, or after it failed, the other old replica stays; the failed one's cluster
    # takes room until it is gone.
    starting = _replicas((2, 1, READY), (3, 2, STARTING))
    assert plan_replicas(starting, version=2, target=2, ceiling=2).model_dump(exclude=_KINDS) == {
        "launch": 0,
        "remove": [],
        "hold": [],
    }
    failed = _replicas((2, 1, READY), (3, 2, FAILED))
    assert plan_replicas(failed, version=2, target=2, ceiling=2).model_dump(exclude=_KINDS) == {
        "launch": 0,
        "remove": [],
        "hold": [],
    }
    gone = _replicas((2, 1, READY))
    assert plan_replicas(gone, version=2, target=2, ceiling=2).model_dump(exclude=_KINDS) == {
        "launch": 1,
        "remove": [],
        "hold": [],
    }
    one_ready = _replicas((2, 1, READY), (3, 2, READY))
    assert plan_replicas(one_ready, version=2, target=2, ceiling=2).model_dump(exclude=_KINDS) == {
        "launch": 1,
        "remove": [2],
        "hold": [],
    }


def test_a_blue_green_update_holds_the_new_set_back_then_swaps_it_in_at_once() -> None:
    old = [(1, 1, READY), (2, 1, READY)]
    blue_green = UpdateMode.BLUE_GREEN

    def plan(*specs: tuple[int, int, ReplicaStatus], ceiling: int = 4) -> dict[str, object]:
        return plan_replicas(
            _replicas(*specs), version=2, target=2, ceiling=ceiling, mode=blue_green
        ).model_dump(exclude=_KINDS)

    assert plan(*old) == {"launch": 2, "remove": [], "hold": []}
    assert plan(*old, (3, 2, READY), (4, 2, STARTING)) == {"launch": 0, "remove": [], "hold": [3]}
    assert plan(*old, (3, 2, READY), (4, 2, READY)) == {"launch": 0, "remove": [1, 2], "hold": []}
    # No room for both sets: it goes as a rolling update does.
    assert plan(*old, ceiling=3) == {"launch": 1, "remove": [], "hold": []}


def test_spot_replicas_launch_as_many_on_demand_as_asked_and_the_surplus_kind_goes_first() -> None:
    def spot(rid: int, status: ReplicaStatus, use_spot: bool) -> ReplicaRecord:
        return _replicas((rid, 1, status))[0].model_copy(update={"use_spot": use_spot})

    # Two spot replicas not READY yet, each covered by an on-demand one (dynamic fallback).
    plan = plan_replicas(
        [spot(1, STARTING, True), spot(2, STARTING, True)], 1, target=4, ceiling=4, ondemand=2
    )
    assert (plan.launch, plan.launch_ondemand, plan.remove) == (2, 2, [])
    # The spot ones are READY: no more covers, the on-demand ones go first (READY or not).
    up = [spot(1, READY, True), spot(2, READY, True), spot(3, READY, False), spot(4, STARTING, False)]
    plan = plan_replicas(up, 1, target=2, ceiling=4, ondemand=0)
    assert (plan.launch, sorted(plan.remove)) == (0, [3, 4])
    # A spot replica failed: its replacement runs on spot, the base on-demand one stays.
    plan = plan_replicas([spot(1, READY, False), spot(2, FAILED, True)], 1, target=2, ceiling=3, ondemand=1)
    assert (plan.launch, plan.launch_ondemand, plan.remove) == (1, 0, [])


def test_an_update_is_done_once_the_target_is_ready_and_no_older_replica_is_live() -> None:
    assert not update_done(_replicas((1, 1, READY), (2, 2, READY)), version=2, target=1)
    assert not update_done(_replicas((2, 2, STARTING)), version=2, target=1)
    assert update_done(_replicas((1, 1, FAILED), (2, 2, READY)), version=2, target=1)


def test_relaunches_after_failed_starts_back_off_up_to_five_minutes() -> None:
    assert [relaunch_delay(n) for n in (1, 2, 3)] == [5.0, 10.0, 20.0]
    assert relaunch_delay(20) == 300.0


def _service_task(**fields: object) -> Task:
    document: dict[str, object] = {"run": "serve", "service": {"readiness_probe": "/", "replicas": 2}}
    return Task.model_validate({**document, **fields})


def test_the_service_section_gives_the_policy_and_port() -> None:
    task = _service_task(resources={"ports": [8000]})
    check_service(task)
    assert replica_port(task) == 8000
    policy = autoscaler_policy(check_service(task))
    assert (policy.min_replicas, policy.ceiling, policy.target_qps_per_replica) == (2, 2, None)


@pytest.mark.parametrize(
    ("fields", "field"),
    [({"run": None}, "run"), ({"num_nodes": 2}, "num_nodes"), ({"service": None}, "service")],
)
def test_what_the_controller_cannot_run_is_refused_naming_the_field(
    fields: dict[str, object], field: str
) -> None:
    with pytest.raises(SpecError) as refused:
        check_service(_service_task(**fields))
    assert refused.value.field == field


def test_one_load_balancer_per_service_restarted_on_its_port_and_stopped(start_replica: object) -> None:
    service = f"lb-{uuid.uuid4().hex[:8]}"
    replica = start_replica(1)  # type: ignore[operator]
    assert isinstance(replica, Replica)

    async def scenario() -> None:
        request = LoadBalancerSync(service=service, policy=LoadBalancingPolicy.LEAST_LOAD, replicas=[])
        first = await sync_load_balancer(request)
        try:
            pushed = request.model_copy(update={"replicas": [replica.endpoint]})
            again = await sync_load_balancer(pushed)
            assert again == first  # the same process: a repeated call starts no second one
            assert get(first.port, "/id") == (200, b"replica 1")
            stats = await load_balancer_stats(service)
            assert stats is not None and stats.window_requests == 1
            # It died: the next sync starts another on the same port (the endpoint stays put).
            os.kill(first.pid, signal.SIGKILL)
            os.waitpid(first.pid, 0)
            assert await load_balancer_stats(service) is None
            last = await sync_load_balancer(pushed.model_copy(update={"port": first.port}))
            assert last.pid != first.pid and last.port == first.port
            assert get(last.port, "/id") == (200, b"replica 1")
        finally:
            await stop_load_balancer(service)
        assert not Path(f"/proc/{last.pid}").exists()
        assert not load_balancer_folder(service).exists()
        assert await load_balancer_stats(service) is None
        await stop_load_balancer(service)  # nothing left: nothing to do

    run(scenario())


def test_a_held_request_is_seen_at_once_and_held_as_long_as_the_worker_says(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    service = f"lb-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv(HOLD_TIMEOUT_ENV, "3")

    async def scenario() -> None:
        watch = ActivityEnvironment()
        assert await watch.run(watch_for_held, service) == HeldWatch.NO_LOAD_BALANCER
        request = LoadBalancerSync(service=service, policy=LoadBalancingPolicy.LEAST_LOAD, replicas=[])
        info = await sync_load_balancer(request)
        try:
            held = asyncio.create_task(asyncio.to_thread(get, info.port, "/id"))
            assert await watch.run(watch_for_held, service) == HeldWatch.HELD
            assert await held == (503, b"no READY replica within 3s\n")
        finally:
            await stop_load_balancer(service)

    run(scenario())


@pytest.mark.parametrize("setting", ["0", "-1", "inf", "nan", "soon"])
def test_a_bad_hold_timeout_is_refused_naming_the_setting(
    monkeypatch: pytest.MonkeyPatch, setting: str
) -> None:
    monkeypatch.setenv(HOLD_TIMEOUT_ENV, setting)
    with pytest.raises(ValueError, match=f"{HOLD_TIMEOUT_ENV}='{setting}': give a number of seconds above 0"):
        hold_timeout()
    monkeypatch.setenv(HOLD_TIMEOUT_ENV, "")
    assert hold_timeout() == 120.0


def test_a_fallback_replica_asks_for_spot_nowhere() -> None:
    spot = {"cpus": "4+", "any_of": [{"infra": "aws", "use_spot": True}, {"infra": "gcp"}]}
    task = _service_task(resources=spot)
    assert asks_for_spot(task) and not asks_for_spot(_service_task())
    fallback = on_demand(task)
    assert not asks_for_spot(fallback)
    assert [r.infra for r in fallback.resources.any_of or []] == ["aws", "gcp"]
