"""Starting a launch without waiting for it, so a test can fault the worker or cancel mid-attempt."""

from __future__ import annotations

import uuid
from typing import Any

from temporalio.client import Client, WorkflowHandle

from skyhop.contract import LAUNCH_WORKFLOW, WORKFLOW_QUEUE
from skyhop.contract.clusters import LaunchRequest, LaunchResult
from skyhop.spec import Task

__all__ = ["start_launch"]


async def start_launch(client: Client, cluster: str, task: Task) -> WorkflowHandle[Any, LaunchResult]:
    return await client.start_workflow(
        LAUNCH_WORKFLOW,
        LaunchRequest(cluster_name=cluster, task=task),
        id=f"launch:{cluster}:{uuid.uuid4().hex[:8]}",
        task_queue=WORKFLOW_QUEUE,
        result_type=LaunchResult,
    )
