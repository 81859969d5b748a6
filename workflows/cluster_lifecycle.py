"""A cluster's lifecycle decisions: which operations its status allows, what a launch's release or
a provider's answer makes of the record, when it is idle, and when it must next wake up.

Pure functions of the record (and the clock value they are given); ``ClusterWorkflow`` runs the
activities these decisions call for.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from skyhop.contract import ClusterStatus, ClusterUpdate, Operation
from skyhop.contract.clusters import ClusterRecord, Release
from skyhop.optimizer import mismatch
from skyhop.providers.base import ClusterHandle, KubernetesAccess, NodeStatus
from skyhop.spec import Task
from skyhop.workflows.scheduler import capacity_of, demand_of, demand_problem

__all__ = [
    "ALLOWED",
    "RECONCILE_INTERVAL_S",
    "Reconciled",
    "apply_release",
    "holder_lost",
    "idle",
    "next_deadline",
    "reconcile",
    "refusal",
    "submit_refusal",
]

RECONCILE_INTERVAL_S = 30 * 60
"""How often an UP cluster asks its provider whether its nodes still exist."""

ALLOWED: dict[ClusterUpdate, tuple[ClusterStatus, ...]] = {
    ClusterUpdate.STOP: (ClusterStatus.UP, ClusterStatus.STOPPED),
    ClusterUpdate.START: (ClusterStatus.UP, ClusterStatus.STOPPED),
    ClusterUpdate.SET_AUTOSTOP: (ClusterStatus.UP, ClusterStatus.INIT),
}
"""The statuses in which these updates are accepted (stopping a STOPPED cluster does nothing;
autostop can be set while a launch still sets the cluster up). ``down`` is always accepted."""

_ACTION = {
    ClusterUpdate.STOP: "stopped",
    ClusterUpdate.START: "started",
    ClusterUpdate.SET_AUTOSTOP: "given autostop",
}


def refusal(record: ClusterRecord, update: ClusterUpdate) -> str | None:
    """Why ``update`` cannot be asked of the cluster in its current status, or None."""
    if update == ClusterUpdate.STOP and record.handle is not None and _pods(record.handle):
        # A pod cannot stop, only be deleted; stopping by deleting would lose what the user kept on
        # it, so it is refused as SkyPilot refuses it.
        name = record.name
        return f"cluster {name} runs on Kubernetes pods, which cannot be stopped: skyhop down {name}"
    allowed = ALLOWED[update]
    if record.status in allowed:
        return None
    return (
        f"cluster {record.name} is {record.status.value}; only a cluster that is "
        f"{' or '.join(s.value for s in allowed)} can be {_ACTION[update]}"
    )


def _pods(handle: ClusterHandle) -> bool:
    return any(isinstance(node.access, KubernetesAccess) for node in handle.nodes)


def submit_refusal(record: ClusterRecord, task: Task, operation: Operation | None) -> str | None:
    """Why the cluster can never run ``task`` as it is now (status, resources), or None."""
    if record.status != ClusterStatus.UP or record.handle is None:
        hint = (
            f"; start it with: skyhop start {record.name}" if record.status == ClusterStatus.STOPPED else ""
        )
        return f"cluster {record.name} is {record.status.value}, not UP{hint}"
    if operation is not None:
        return f"cluster {record.name} is being {operation.past}"
    if task.run is None:
        return "the task has no 'run' command"
    handle = record.handle
    reason = mismatch(task.resources, task.num_nodes, handle.offering, len(handle.nodes))
    if reason is not None:
        return reason
    problem = demand_problem(demand_of(task), capacity_of(handle))
    if problem is not None:
        return f"the job can never run on cluster {record.name}: {problem}"
    return None


def apply_release(record: ClusterRecord, release: Release, now: float) -> None:
    """What a launch's ``release`` changes: the cluster it brought up, autostop, or a failed start."""
    if release.handle is not None:
        record.handle = release.handle
        record.provision_request = release.provision_request or record.provision_request
        record.status = ClusterStatus.UP
        record.ever_up = True
        record.degraded = None
        record.launched_at = record.launched_at or now
        record.refreshed_at = now
        record.resources = release.resources or record.resources
        record.num_nodes = release.num_nodes or record.num_nodes
        record.user = release.user or record.user
    if release.idle_minutes is not None:
        record.idle_minutes = release.idle_minutes
        record.autostop_down = release.autostop_down
        record.idle_since = None  # setting autostop restarts the idle clock
    if release.failed and not record.ever_up:
        record.status = ClusterStatus.TERMINATED


def holder_lost(record: ClusterRecord, launch_id: str) -> None:
    """A launch ended holding the lock without releasing it: as if it had failed, and say so."""
    if not record.ever_up:
        record.status = ClusterStatus.TERMINATED
    if record.status != ClusterStatus.TERMINATED:
        record.degraded = record.degraded or (
            f"launch {launch_id} ended without finishing (terminated or timed out); "
            "what it set up may be incomplete"
        )


class Reconciled(BaseModel):
    """What the provider's answer makes of the record."""

    status: ClusterStatus | None
    """The record's new status; None to leave it as it is."""
    bad: dict[int, NodeStatus] = {}
    """Ranks of nodes that are not UP, and what they are: their jobs fail."""
    reason: str | None = None
    """Why, for ``degraded`` and the failed jobs' error."""


def reconcile(record: ClusterRecord, statuses: Sequence[NodeStatus]) -> Reconciled:
    """Compare the record with the nodes' real statuses (in rank order)."""
    bad = {rank: status for rank, status in enumerate(statuses) if status != NodeStatus.UP}
    if not bad:
        # Started outside skyhop, or a half-failed cluster whose nodes are all back.
        return Reconciled(status=ClusterStatus.UP)
    if record.status == ClusterStatus.STOPPED and all(s == NodeStatus.STOPPED for s in statuses):
        return Reconciled(status=None)
    reason = "; ".join(status.describe_node(rank) for rank, status in bad.items())
    if all(s.gone for s in statuses):
        status = ClusterStatus.TERMINATED
    elif all(s == NodeStatus.STOPPED for s in statuses):
        status = ClusterStatus.STOPPED
    else:
        status = ClusterStatus.INIT
    return Reconciled(status=status, bad=bad, reason=f"{reason} (changed outside skyhop)")


def idle(record: ClusterRecord, *, lock_busy: bool, jobs_active: bool) -> bool:
    """An UP cluster with no job, nobody holding or waiting for its lock: autostop's clock runs."""
    return record.status == ClusterStatus.UP and not lock_busy and not jobs_active


def next_deadline(record: ClusterRecord, *, is_idle: bool, lock_free: bool) -> float | None:
    """The nearest moment the cluster must act on its own: autostop, or the periodic reconcile."""
    deadlines = [record.autostop_at] if is_idle else []
    if record.status == ClusterStatus.UP and lock_free:
        deadlines.append((record.refreshed_at or 0.0) + RECONCILE_INTERVAL_S)
    return min((d for d in deadlines if d is not None), default=None)
