"""``workflows.pool_plan``: which workers a pool brings up or lets go."""

from __future__ import annotations

from datetime import timedelta

from skyhop.contract.pools import PoolState, PoolWorker, WorkerStatus
from skyhop.spec import Task
from skyhop.workflows.pool_plan import failure_backoff, surplus_workers, workers_to_add


def _pool(wanted: int, *workers: tuple[int, WorkerStatus, int], version: int = 1) -> PoolState:
    return PoolState(
        name="p",
        task=Task(setup="true"),
        version=version,
        workers_wanted=wanted,
        workers=[
            PoolWorker(worker_id=i, cluster_name=f"p-worker-{i}", version=v, status=s) for i, s, v in workers
        ],
    )


IDLE, BUSY, UP = WorkerStatus.IDLE, WorkerStatus.BUSY, WorkerStatus.PROVISIONING


def test_missing_workers_are_added_and_failed_or_leaving_ones_do_not_count() -> None:
    assert workers_to_add(_pool(3), set()) == 3
    assert workers_to_add(_pool(3, (1, IDLE, 1), (2, WorkerStatus.FAILED, 1)), set()) == 2
    assert workers_to_add(_pool(2, (1, IDLE, 1), (2, BUSY, 1)), {2}) == 1
    assert workers_to_add(PoolState(name="p", workers_wanted=2), set()) == 0  # not applied yet


def test_a_smaller_pool_lets_idle_workers_go_newest_first_never_busy_ones() -> None:
    pool = _pool(1, (1, BUSY, 1), (2, IDLE, 1), (3, IDLE, 1))
    assert surplus_workers(pool) == {3: None, 2: None}
    assert surplus_workers(_pool(0, (1, BUSY, 1), (2, UP, 1))) == {}


def test_workers_of_an_old_version_go_once_idle_and_are_replaced() -> None:
    pool = _pool(2, (1, IDLE, 1), (2, BUSY, 1), version=2)
    assert surplus_workers(pool) == {1: "set up with version 1: replaced by version 2"}
    assert workers_to_add(pool, {1}) == 2


def test_a_worker_that_could_not_come_up_waits_longer_each_time() -> None:
    assert [failure_backoff(n) for n in (1, 2, 3)] == [timedelta(seconds=s) for s in (10, 20, 40)]
    assert failure_backoff(50) == timedelta(minutes=10)
