"""The scheduler as a pure function: demand and free resources in, placements out."""

from __future__ import annotations

import pytest

from skyhop.providers.base import ClusterHandle, NodeHandle, Offering
from skyhop.spec import Resources, Task
from skyhop.workflows.scheduler import (
    DEFAULT_CPU_DEMAND,
    Demand,
    NodeAllocation,
    NodeCapacity,
    capacity_of,
    demand_of,
    demand_problem,
    schedule,
)

CPU4 = [NodeCapacity(cpus=4)]
GPU_NODE = NodeCapacity(cpus=16, gpus={"A100": 4})


def test_fifo_starts_the_prefix_that_fits_and_blocks_behind_the_head() -> None:
    queue = [Demand(cpus=2), Demand(cpus=2), Demand(cpus=1), Demand(cpus=0.5)]
    started = schedule(CPU4, [], queue)
    assert [p[0].cpus for p in started] == [2, 2]
    # The third job fits once one of the first two ends; the fourth waits behind it even though it
    # would fit now (head-of-line blocking keeps the start order equal to the submission order).
    running = [started[0]]
    assert [p[0].cpus for p in schedule(CPU4, running, queue[2:])] == [1, 0.5]
    big_head = [Demand(cpus=3), Demand(cpus=0.5)]
    assert schedule(CPU4, [[NodeAllocation(node=0, cpus=2)]], big_head) == []


def test_default_cpu_demand_gives_two_jobs_per_cpu() -> None:
    started = schedule([NodeCapacity(cpus=2)], [], [Demand()] * 6)
    assert len(started) == 4 and DEFAULT_CPU_DEMAND == 0.5


def test_whole_gpus_get_distinct_indices_and_are_freed_by_allocation() -> None:
    started = schedule(
        [GPU_NODE], [], [Demand(gpus={"A100": 2}), Demand(gpus={"A100": 1}), Demand(gpus={"A100": 2})]
    )
    assert [p[0].gpu_ids for p in started] == [[0, 1], [2]]
    # Jobs 0 and 1 hold GPUs 0-2: with only GPU 3 free a 2-GPU job waits; once job 0 ends it gets 0 and 1.
    assert schedule([GPU_NODE], started, [Demand(gpus={"A100": 2})]) == []
    assert schedule([GPU_NODE], [started[1]], [Demand(gpus={"A100": 2})])[0][0].gpu_ids == [0, 1]


def test_fractional_gpus_share_one_device_best_fit() -> None:
    halves = schedule([GPU_NODE], [], [Demand(gpus={"A100": 0.5})] * 3)
    assert [p[0].gpu_ids for p in halves] == [[0], [0], [1]]
    assert all(p[0].gpu_share == 0.5 for p in halves)
    # A quarter goes to the half-used GPU 1, not to an untouched one.
    quarter = schedule([GPU_NODE], halves, [Demand(gpus={"A100": 0.25})])
    assert quarter[0][0].gpu_ids == [1]
    # A whole GPU cannot use the shared ones.
    whole = schedule([GPU_NODE], halves, [Demand(gpus={"A100": 2})])
    assert whole[0][0].gpu_ids == [2, 3]


def test_multi_node_job_takes_distinct_nodes_lowest_ranks_first() -> None:
    nodes = [NodeCapacity(cpus=4)] * 3
    busy = [[NodeAllocation(node=0, cpus=4)]]
    started = schedule(nodes, busy, [Demand(cpus=2, num_nodes=2), Demand(cpus=2, num_nodes=2)])
    assert [[a.node for a in p] for p in started] == [[1, 2], [1, 2]]
    assert schedule(nodes, busy + started, [Demand(cpus=0.5, num_nodes=2)]) == []


def test_demand_problem_names_what_can_never_fit() -> None:
    nodes = [GPU_NODE, GPU_NODE]
    assert demand_problem(Demand(gpus={"A100": 4}, num_nodes=2), nodes) is None
    assert "3 nodes requested, the cluster has 2" in (demand_problem(Demand(num_nodes=3), nodes) or "")
    assert "5" in (demand_problem(Demand(gpus={"A100": 5}), nodes) or "")
    assert "whole number" in (demand_problem(Demand(gpus={"A100": 1.5}), nodes) or "")
    assert "one accelerator type" in (demand_problem(Demand(gpus={"A100": 1, "T4": 1}), nodes) or "")
    assert "even when idle" in (demand_problem(Demand(cpus=32), nodes) or "")


def test_demand_and_capacity_come_from_task_and_offering() -> None:
    task = Task(run="x", num_nodes=2, resources=Resources(cpus="2+", accelerators="a100:0.5"))
    assert demand_of(task) == Demand(cpus=2, gpus={"A100": 0.5}, num_nodes=2)
    assert demand_of(Task(run="x")) == Demand(cpus=DEFAULT_CPU_DEMAND)
    offering = Offering(
        provider="sim", instance_type="g", cpus=8, memory_gib=32, accelerators={"A100": 2}, price=1
    )
    nodes = [NodeHandle(rank=r, instance_id=str(r), ip="10.0.0.1", runtime_dir="/x") for r in range(3)]
    handle = ClusterHandle(cluster_name="c", offering=offering, nodes=nodes)
    assert capacity_of(handle) == [NodeCapacity(cpus=8, gpus={"A100": 2})] * 3


@pytest.mark.parametrize("jobs", [1, 10, 100])
def test_schedule_never_overcommits(jobs: int) -> None:
    nodes = [NodeCapacity(cpus=3, gpus={"T4": 2})] * 2
    queue = [Demand(cpus=0.5 + (i % 3) * 0.5, gpus={"T4": [0.25, 1, 0.5][i % 3]}) for i in range(jobs)]
    started = schedule(nodes, [], queue)
    for node in range(2):
        allocations = [a for p in started for a in p if a.node == node]
        assert sum(a.cpus for a in allocations) <= 3 + 1e-9
        for gpu in range(2):
            assert sum(a.gpu_share for a in allocations if gpu in a.gpu_ids) <= 1 + 1e-9
