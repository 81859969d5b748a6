"""``skyhop status`` and ``skyhop down``: clusters found through Temporal visibility."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from skyhop.cli.failures import asked_again, is_not_found, stuck_reason
from skyhop.cli.output import age, info, print_json, table
from skyhop.contract import (
    ClusterQuery,
    ClusterStatus,
    ClusterUpdate,
    SearchAttribute,
    WorkflowKind,
    cluster_workflow_id,
)
from skyhop.contract.clusters import ClusterRecord
from skyhop.contract.failures import innermost_message

if TYPE_CHECKING:
    from temporalio.client import Client, WorkflowHandle

__all__ = [
    "BROKEN",
    "BrokenCluster",
    "inspect_cluster",
    "list_clusters",
    "refresh_clusters",
    "remove_broken",
    "run_status",
    "survey_clusters",
]

_RUNNING_CLUSTERS = f"{SearchAttribute.KIND} = '{WorkflowKind.CLUSTER}' AND ExecutionStatus = 'Running'"
_QUERY_TIMEOUT = timedelta(seconds=20)
BROKEN = "BROKEN"
"""The status shown for a cluster whose workflow cannot run (its task fails, or it does not answer)."""


class BrokenCluster(BaseModel):
    """A cluster whose workflow is running but stuck: no record can be read, no update is taken."""

    name: str
    reason: str

    @property
    def hint(self) -> str:
        return f"cluster {self.name} is {BROKEN}: {self.reason}; remove it with: skyhop down {self.name}"


async def inspect_cluster(client: Client, name: str) -> ClusterRecord | BrokenCluster | None:
    """The cluster's record; why it is broken when its workflow cannot answer; None when it is gone."""
    from temporalio.service import RPCError

    handle = client.get_workflow_handle(cluster_workflow_id(name))
    try:
        reason = await stuck_reason(handle)
        if reason is not None:
            return BrokenCluster(name=name, reason=f"its workflow task fails ({reason})")
        record: ClusterRecord = await asked_again(
            lambda: handle.query(ClusterQuery.STATUS, result_type=ClusterRecord, rpc_timeout=_QUERY_TIMEOUT)
        )
    except RPCError as exc:
        if is_not_found(exc):
            return None
        return BrokenCluster(name=name, reason=f"its workflow does not answer ({innermost_message(exc)})")
    return record


async def survey_clusters(client: Client) -> tuple[list[ClusterRecord], list[BrokenCluster]]:
    """Every live cluster (visibility listing, then a look at each): the readable ones and the broken ones."""
    ids = [wf.id async for wf in client.list_workflows(_RUNNING_CLUSTERS)]
    found = await asyncio.gather(*(inspect_cluster(client, wid.removeprefix("cluster:")) for wid in ids))
    records = [r for r in found if isinstance(r, ClusterRecord) and r.status != ClusterStatus.TERMINATED]
    broken = [b for b in found if isinstance(b, BrokenCluster)]
    return sorted(records, key=lambda r: r.name), sorted(broken, key=lambda b: b.name)


async def list_clusters(client: Client) -> list[ClusterRecord]:
    """Records of every live cluster whose workflow answers."""
    records, _ = await survey_clusters(client)
    return records


async def remove_broken(handle: WorkflowHandle[Any, Any]) -> None:
    """Take down a cluster whose workflow is stuck: its nodes found by tag, then its workflow terminated.

    The workflow cannot run ``down`` itself, and its record (the node handles) cannot be read, so
    the providers are asked for the instances tagged with the cluster's name. Terminating is the
    one way to end a workflow that runs no code; nothing of it is left to clean up afterwards.
    """
    from skyhop.activities.cluster_ops import remove_tagged_instances

    name = handle.id.removeprefix("cluster:")
    reason = await stuck_reason(handle) or "its workflow does not answer"
    result = await remove_tagged_instances(name)
    await handle.terminate(reason=f"skyhop down of a broken cluster: {reason}")
    removed = result.removed
    nodes = (
        f"{len(removed)} node(s) found by tag ({', '.join(removed)})" if removed else "no node found by tag"
    )
    info(f"Cluster {name} was {BROKEN} ({reason}): removed {nodes} and terminated its workflow.")
    if result.unreachable:
        info(f"Not asked, remove by hand what they hold for {name}: {'; '.join(result.unreachable)}")


def _row(record: ClusterRecord) -> list[str]:
    handle = record.handle
    infra = handle.offering.location if handle else (record.resources.infra or "-")
    if handle:
        o = handle.offering
        accelerators = "".join(f", {n}:{c:g}" for n, c in o.accelerators.items())
        resources = (
            f"{len(handle.nodes)}x {o.instance_type} ({o.cpus:g} CPU, {o.memory_gib:g} GB{accelerators})"
        )
    else:
        resources = f"{record.num_nodes}x {record.resources.describe()}"
    autostop = "-"
    if record.idle_minutes is not None:
        autostop = f"{record.idle_minutes}m" + (" (down)" if record.autostop_down else "")
    status = record.status.value + (" (degraded)" if record.degraded else "")
    return [record.name, infra, resources, status, age(record.launched_at), autostop]


async def refresh_clusters(client: Client) -> None:
    """Have every live cluster reconcile with its provider (at once); a cluster that fails is left as is."""
    from temporalio.client import WorkflowUpdateFailedError
    from temporalio.service import RPCError

    ids = [wf.id async for wf in client.list_workflows(_RUNNING_CLUSTERS)]
    results = await asyncio.gather(
        *(
            client.get_workflow_handle(wid).execute_update(ClusterUpdate.REFRESH, result_type=ClusterRecord)
            for wid in ids
        ),
        return_exceptions=True,
    )
    for wid, result in zip(ids, results, strict=True):
        if isinstance(result, WorkflowUpdateFailedError | RPCError):
            info(f"Could not refresh {wid.removeprefix('cluster:')}: {result.cause or result}")
        elif isinstance(result, BaseException):
            raise result


async def run_status(as_json: bool, *, refresh: bool = False) -> int:
    """Print the clusters as a table, or as JSON (after asking the providers, with ``refresh``)."""
    from skyhop.cli.session import open_client

    client = await open_client()
    if refresh:
        await refresh_clusters(client)
    records, broken = await survey_clusters(client)
    if as_json:
        listing = [r.model_dump(mode="json", exclude={"holder", "waiting"}) for r in records]
        listing += [{"name": b.name, "status": BROKEN, "reason": b.reason} for b in broken]
        print_json("clusters", sorted(listing, key=lambda c: str(c["name"])))
        return 0
    if not records and not broken:
        info("No clusters. Launch one with: skyhop launch TASK.yaml")
        return 0
    rows = [_row(r) for r in records] + [[b.name, "-", "-", BROKEN, "-", "-"] for b in broken]
    table(["CLUSTER", "INFRA", "RESOURCES", "STATUS", "LAUNCHED", "AUTOSTOP"], sorted(rows))
    for record in records:
        if record.degraded:
            info(f"{record.name}: {record.degraded}")
    for cluster in broken:
        info(cluster.hint)
    return 0
