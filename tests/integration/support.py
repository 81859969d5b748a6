"""Driving skyhop's workflows from a test the way a programmatic Temporal client would."""

from __future__ import annotations

import uuid

from temporalio.client import Client

from cli.client import connect
from cli.config import TemporalConfig
from spec import Task
from workflows.contract import (
    LAUNCH_WORKFLOW,
    WORKFLOW_QUEUE,
    ClusterRecord,
    LaunchRequest,
    LaunchResult,
    cluster_workflow_id,
)

__all__ = ["client_for", "down", "launch", "record", "unique_cluster"]


async def client_for(address: str) -> Client:
    return await connect(TemporalConfig(), address)


def unique_cluster(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def launch(client: Client, cluster: str, task: Task, workflow_id: str | None = None) -> LaunchResult:
    result: LaunchResult = await client.execute_workflow(
        LAUNCH_WORKFLOW,
        LaunchRequest(cluster_name=cluster, task=task, user="tester"),
        id=workflow_id or f"launch:{cluster}:{uuid.uuid4().hex[:8]}",
        task_queue=WORKFLOW_QUEUE,
        result_type=LaunchResult,
    )
    return result


async def record(client: Client, cluster: str) -> ClusterRecord:
    result: ClusterRecord = await client.get_workflow_handle(cluster_workflow_id(cluster)).query(
        "status", result_type=ClusterRecord
    )
    return result


async def down(client: Client, cluster: str) -> ClusterRecord:
    result: ClusterRecord = await client.get_workflow_handle(cluster_workflow_id(cluster)).execute_update(
        "down", result_type=ClusterRecord
    )
    return result
