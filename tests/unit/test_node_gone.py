"""A node known to be gone (its pod ended) loses its job at once, with the provider's reason."""

from __future__ import annotations

from skyhop.activities.node_jobs import JobTracker
from skyhop.providers.base import ClusterHandle, LocalAccess, NodeHandle, Offering
from skyhop.providers.runtime.errors import NodeGoneError, NodeUnreachableError
from skyhop.providers.runtime.jobs import NodeJobState, NodeJobStatus


def _handle(num_nodes: int = 1) -> ClusterHandle:
    offering = Offering(provider="kubernetes", instance_type="n", cpus=4, memory_gib=16, price=0)
    nodes = [
        NodeHandle(
            rank=r, instance_id=f"p-{r}", ip=f"10.244.0.{5 + r}", runtime_dir="/r", access=LocalAccess()
        )
        for r in range(num_nodes)
    ]
    return ClusterHandle(cluster_name="c", offering=offering, nodes=nodes)


def test_a_gone_node_fails_its_job_at_once_and_a_silent_one_only_later() -> None:
    tracker = JobTracker(_handle(), "job-1", 1)
    assert tracker.hear(0, NodeUnreachableError("pod p-0: connection refused")) is None
    outcome = tracker.hear(0, NodeGoneError("pod p-0 ended: Evicted: The node was low on resource: memory."))
    assert outcome is not None and outcome.lost_rank == 0
    assert (
        outcome.error
        == "node 0 (10.244.0.5) is gone: pod p-0 ended: Evicted: The node was low on resource: memory."
    )


def test_a_cancel_seen_while_another_node_is_silent_waits_for_that_node() -> None:
    # A watcher retried after its first attempt stopped the head for node 1's loss (and timed out
    # before its result was recorded) finds the head CANCELLED and node 1 silent: the job failed.
    tracker = JobTracker(_handle(2), "job-1", 2)
    assert tracker.hear(1, TimeoutError()) is None
    assert tracker.hear(0, NodeJobState(status=NodeJobStatus.CANCELLED)) is None
    assert tracker.outcome() is None
    lost = tracker.hear(1, NodeGoneError("pod p-1 ended"))
    assert lost is not None and lost.status == NodeJobStatus.FAILED and lost.lost_rank == 1


def test_a_cancel_is_the_outcome_once_every_other_node_answered() -> None:
    tracker = JobTracker(_handle(), "job-1", 1)
    assert tracker.hear(0, NodeUnreachableError("connection refused")) is None
    assert tracker.hear(0, NodeJobState(status=NodeJobStatus.CANCELLED)) is None
    outcome = tracker.outcome()
    assert outcome is not None and outcome.status == NodeJobStatus.CANCELLED
