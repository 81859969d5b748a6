"""A node known to be gone (its pod ended) loses its job at once, with the provider's reason."""

from __future__ import annotations

from skyhop.activities.node_jobs import JobTracker
from skyhop.providers.base import ClusterHandle, LocalAccess, NodeHandle, Offering
from skyhop.providers.runtime.errors import NodeGoneError, NodeUnreachableError


def _handle() -> ClusterHandle:
    offering = Offering(provider="kubernetes", instance_type="n", cpus=4, memory_gib=16, price=0)
    node = NodeHandle(rank=0, instance_id="p-0", ip="10.244.0.5", runtime_dir="/r", access=LocalAccess())
    return ClusterHandle(cluster_name="c", offering=offering, nodes=[node])


def test_a_gone_node_fails_its_job_at_once_and_a_silent_one_only_later() -> None:
    tracker = JobTracker(_handle(), "job-1", 1)
    assert tracker.hear(0, NodeUnreachableError("pod p-0: connection refused")) is None
    outcome = tracker.hear(0, NodeGoneError("pod p-0 ended: Evicted: The node was low on resource: memory."))
    assert outcome is not None and outcome.lost_rank == 0
    assert (
        outcome.error
        == "node 0 (10.244.0.5) is gone: pod p-0 ended: Evicted: The node was low on resource: memory."
    )
