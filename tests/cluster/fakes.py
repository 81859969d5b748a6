"""``ClusterWorkflow`` under a worker whose activities are fakes: for time-skipping and replay tests.

The fakes are re-declared under the real activities' names (the way Temporal's samples mock
activities) and record every call, so a test sees what the workflow asked the cloud to do.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import timedelta
from typing import Any

from temporalio import activity
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker

from skyhop.activities.cluster_ops import CancelJobsInput, ProbeResult, StartClusterInput, StopResult
from skyhop.activities.models import (
    LaunchRunningInput,
    RunJobInput,
    SetupInput,
    SyncWorkdirInput,
    WatchJobsInput,
    WatchJobsResult,
)
from skyhop.contract import (
    LONG_QUEUE,
    SEARCH_ATTRIBUTES,
    SHORT_QUEUE,
    WORKFLOW_QUEUE,
    ClusterStatus,
    cluster_workflow_id,
)
from skyhop.contract.clusters import ClusterInput, ClusterRecord
from skyhop.providers.base import ClusterHandle, NodeHandle, NodeStatus, Offering
from skyhop.providers.runtime.jobs import JobOutcome
from skyhop.spec import Task
from skyhop.workflows.cluster import ClusterWorkflow

__all__ = [
    "FakeCloud",
    "query_status",
    "register_search_attributes",
    "running_cluster",
    "serving",
    "up_record",
]


async def query_status(handle: WorkflowHandle[ClusterWorkflow, ClusterRecord]) -> ClusterRecord:
    """The record, asking again when the time-skipping server drops a query.

    It sometimes leaves a query that arrives during a continue-as-new unanswered; the real server
    does not (the same scenario runs against it in the integration tests).
    """
    while True:
        try:
            return await handle.query(ClusterWorkflow.status, rpc_timeout=timedelta(seconds=2))
        except RPCError as exc:
            if exc.status not in (RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.CANCELLED):
                raise


async def register_search_attributes(client: Client) -> None:
    """The test server only has skyhop's search attributes once asked (it cannot list them)."""
    kinds = {
        name: IndexedValueType.Value(f"INDEXED_VALUE_TYPE_{kind.upper()}")
        for name, kind in SEARCH_ATTRIBUTES.items()
    }
    await client.operator_service.add_search_attributes(
        AddSearchAttributesRequest(namespace=client.namespace, search_attributes=kinds)
    )


def up_record(
    name: str, *, idle_minutes: int | None = None, down: bool = False, cpus: float = 2
) -> ClusterRecord:
    """The record of an UP one-node cluster, as a launch leaves it."""
    offering = Offering(provider="local", instance_type="local", cpus=cpus, memory_gib=4, price=0)
    node = NodeHandle(rank=0, instance_id=f"{name}-0", ip="127.0.0.1", runtime_dir=f"/nonexistent/{name}")
    return ClusterRecord(
        name=name,
        status=ClusterStatus.UP,
        handle=ClusterHandle(cluster_name=name, offering=offering, nodes=[node]),
        ever_up=True,
        idle_minutes=idle_minutes,
        autostop_down=down,
    )


class FakeCloud:
    """Activities that touch nothing and record what they were asked; jobs end when released."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.statuses: list[NodeStatus] | None = [NodeStatus.UP]
        self.hold_jobs = False
        self.released: set[str] = set()
        self.can_stop = True
        self.launch_alive = False
        """What ``launch_running`` answers (a lease asks it once its launch has closed)."""
        self.outcomes: dict[str, JobOutcome] = {}
        """How a job ends on the nodes, by key, when not SUCCEEDED."""
        self.started: list[int] = []
        """Job ids in the order ``start_job`` started them (what a watcher finds on the nodes)."""

    @activity.defn(name="stop_cluster")
    async def stop_cluster(self, handle: ClusterHandle) -> StopResult:
        self.calls.append("stop_cluster")
        return StopResult(kept_nodes=self.can_stop)

    @activity.defn(name="start_cluster")
    async def start_cluster(self, request: StartClusterInput) -> ClusterHandle:
        self.calls.append("start_cluster recreate" if request.recreate else "start_cluster")
        return request.handle

    @activity.defn(name="terminate")
    async def terminate(self, handle: ClusterHandle) -> None:
        self.calls.append("terminate")

    @activity.defn(name="start_job")
    async def start_job(self, request: RunJobInput) -> None:
        self.calls.append(f"start_job {request.job.job_id}")
        self.started.append(request.job.job_id)

    @activity.defn(name="watch_jobs")
    async def watch_jobs(self, request: WatchJobsInput) -> WatchJobsResult:
        """Like the real watcher: returns once a followed job is released or a newer one started."""
        while True:
            ended = {
                job.job_id: self.outcomes.get(
                    f"job-{job.job_id}", JobOutcome(status="SUCCEEDED", exit_code=0)
                )
                for job in request.jobs
                if job.job_id in self.started and (not self.hold_jobs or f"job-{job.job_id}" in self.released)
            }
            followed = {job.job_id for job in request.jobs}
            newer = [i for i in self.started if i > request.newer_than and i not in followed]
            newer = [i for i in newer if i not in request.known]
            if ended or newer:
                return WatchJobsResult(ended=ended, newer=newer)
            activity.heartbeat()
            await asyncio.sleep(0.05)

    @activity.defn(name="cancel_jobs")
    async def cancel_jobs(self, request: CancelJobsInput) -> None:
        self.calls.append("cancel_jobs " + ",".join(str(job.job_id) for job in request.jobs))

    @activity.defn(name="sync_workdir")
    async def sync_workdir(self, request: SyncWorkdirInput) -> None:
        self.calls.append(f"sync_workdir {request.workdir}")

    @activity.defn(name="run_setup")
    async def run_setup(self, request: SetupInput) -> None:
        self.calls.append(f"run_setup {request.task.setup}")

    @activity.defn(name="probe_cluster")
    async def probe_cluster(self, handle: ClusterHandle) -> ProbeResult:
        self.calls.append("probe_cluster")
        return ProbeResult(statuses=self.statuses)

    @activity.defn(name="launch_running")
    async def launch_running(self, request: LaunchRunningInput) -> bool:
        self.calls.append(f"launch_running {request.workflow_id}")
        return self.launch_alive

    def workflows(self) -> list[type]:
        return [ClusterWorkflow]

    def long_activities(self) -> list[Callable[..., Any]]:
        return [
            self.stop_cluster,
            self.start_cluster,
            self.terminate,
            self.start_job,
            self.watch_jobs,
            self.sync_workdir,
            self.run_setup,
        ]

    def short_activities(self) -> list[Callable[..., Any]]:
        return [self.cancel_jobs, self.probe_cluster, self.launch_running]

    def local_activities(self) -> list[Callable[..., Any]]:
        """Activities the workflows run as local activities: registered on the workflow worker."""
        return []

    def workers(self, client: Client) -> list[Worker]:
        return [
            # No sticky cache: every workflow task replays the whole history (a determinism check
            # for free), and a stopped worker leaves no sticky queue behind for the server to wait on.
            Worker(
                client,
                task_queue=WORKFLOW_QUEUE,
                workflows=self.workflows(),
                activities=self.local_activities(),
                max_cached_workflows=0,
            ),
            Worker(client, task_queue=LONG_QUEUE, activities=self.long_activities()),
            Worker(client, task_queue=SHORT_QUEUE, activities=self.short_activities()),
        ]


@asynccontextmanager
async def serving(client: Client, cloud: FakeCloud) -> AsyncIterator[None]:
    """Run the fake cloud's workers for the length of the block."""
    async with AsyncExitStack() as stack:
        for worker in cloud.workers(client):
            await stack.enter_async_context(worker)
        yield


@asynccontextmanager
async def running_cluster(
    client: Client,
    record: ClusterRecord,
    cloud: FakeCloud,
    history_limit: int | None = None,
    setup_task: Task | None = None,
) -> AsyncIterator[WorkflowHandle[ClusterWorkflow, ClusterRecord]]:
    """Start a ClusterWorkflow for ``record`` under the fake cloud's workers."""
    async with serving(client, cloud):
        handle = await client.start_workflow(
            ClusterWorkflow.run,
            ClusterInput(record=record, history_limit=history_limit, setup_task=setup_task),
            id=cluster_workflow_id(f"{record.name}-{uuid.uuid4().hex[:6]}"),
            task_queue=WORKFLOW_QUEUE,
        )
        yield handle
