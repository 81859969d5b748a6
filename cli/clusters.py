"""``skyhop status`` and ``skyhop down``: clusters found through Temporal visibility."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from cli.output import age, info, print_json, table
from workflows.contract import ClusterRecord, ClusterStatus

if TYPE_CHECKING:
    from temporalio.client import Client

__all__ = ["list_clusters", "refresh_clusters", "run_status"]

_RUNNING_CLUSTERS = "SkyhopKind = 'cluster' AND ExecutionStatus = 'Running'"


async def list_clusters(client: Client) -> list[ClusterRecord]:
    """Records of every live cluster, by visibility listing then a query each."""
    ids = [wf.id async for wf in client.list_workflows(_RUNNING_CLUSTERS)]
    records = await asyncio.gather(
        *(client.get_workflow_handle(wid).query("status", result_type=ClusterRecord) for wid in ids),
        return_exceptions=True,
    )
    alive = [r for r in records if isinstance(r, ClusterRecord) and r.status != ClusterStatus.TERMINATED]
    return sorted(alive, key=lambda r: r.name)


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
            client.get_workflow_handle(wid).execute_update("refresh", result_type=ClusterRecord)
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
    from cli.session import open_client

    client = await open_client()
    if refresh:
        await refresh_clusters(client)
    records = await list_clusters(client)
    if as_json:
        print_json("clusters", [r.model_dump(mode="json", exclude={"holder", "waiting"}) for r in records])
        return 0
    if not records:
        info("No clusters. Launch one with: skyhop launch TASK.yaml")
        return 0
    table(["CLUSTER", "INFRA", "RESOURCES", "STATUS", "LAUNCHED", "AUTOSTOP"], [_row(r) for r in records])
    for record in records:
        if record.degraded:
            info(f"{record.name}: {record.degraded}")
    return 0
