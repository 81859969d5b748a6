"""``LaunchWorkflow`` (and the real ``ClusterWorkflow``) under fake activities, on the time-skipping server.

``FakeProviders`` extends the cluster tests' ``FakeCloud`` with what a launch calls: a scripted
optimizer over a list of offerings (honouring the blocklist, as the real one does), provision
attempts that fail where a test says, and the cluster activities, which talk to the real
``ClusterWorkflow`` through the test's client. Every call is recorded.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

from temporalio import activity
from temporalio.client import Client, WorkflowHandle
from temporalio.exceptions import ApplicationError

from skyhop.activities.clusters import ClusterActivities
from skyhop.activities.models import OptimizeInput
from skyhop.activities.provisioning import AttemptFailure, AttemptOutcome
from skyhop.contract import WORKFLOW_QUEUE, ErrorType
from skyhop.contract.clusters import LaunchRequest, LaunchResult
from skyhop.contract.search import launch_search_attributes
from skyhop.optimizer import Candidate, Plan
from skyhop.providers.base import ClusterHandle, NodeHandle, Offering, ProvisionRequest
from skyhop.providers.errors import FailureScope
from skyhop.spec import Task
from skyhop.workflows.launch import LaunchWorkflow
from skyhop.workflows.lock_lease import LockLeaseWorkflow
from tests.cluster.fakes import FakeCloud

__all__ = ["CAPACITY", "FATAL", "QUOTA", "FakeProviders", "offering", "start_launch"]

CAPACITY = AttemptFailure(
    scope=FailureScope.ZONE, kind="capacity", code="InsufficientInstanceCapacity", message="full"
)
QUOTA = AttemptFailure(scope=FailureScope.REGION, kind="quota", code="VcpuLimitExceeded", message="quota")
FATAL = AttemptFailure(
    scope=FailureScope.FATAL, kind="invalid request", code="InvalidParameter", message="bad", leftover=False
)


def offering(
    region: str, zone: str | None, price: float = 1.0, instance_type: str = "m6i.2xlarge"
) -> Offering:
    """An AWS-like offering in ``region``/``zone``."""
    return Offering(
        provider="aws",
        instance_type=instance_type,
        cpus=8,
        memory_gib=32,
        region=region,
        zone=zone,
        price=price,
        spot_price=price / 3,
    )


class FakeProviders(FakeCloud):
    """A cloud whose catalog is ``offerings`` (best first) and whose attempts fail as ``failures`` say."""

    def __init__(self, client: Client, offerings: list[Offering]) -> None:
        super().__init__()
        self.client = client
        self.offerings = offerings
        self.failures: dict[str, AttemptFailure] = {}
        """By offering location: how an attempt there fails (every time, until removed)."""
        self.hold_attempts = False
        """Attempts wait (heartbeating) until cancelled: for cancellation tests."""
        self.requests: list[ProvisionRequest] = []

    @activity.defn(name="optimize")
    async def optimize(self, request: OptimizeInput) -> Plan:
        self.calls.append("optimize")
        found = [o for o in self.offerings if not request.blocklist.blocks(o)]
        if not found:
            raise ApplicationError("nothing left", type=ErrorType.NO_FEASIBLE_OFFERING, non_retryable=True)
        resources = request.task.resources.alternatives[0]
        choice = Candidate(
            offering=found[0],
            use_spot=resources.use_spot,
            image_id=resources.image_for(found[0].region),
            hourly_cost=found[0].price,
        )
        return Plan(choice=choice, candidates=[found[0]], considered=[choice])

    @activity.defn(name="provision_attempt")
    async def provision_attempt(self, request: ProvisionRequest) -> AttemptOutcome:
        self.calls.append(f"provision_attempt {request.offering.location}")
        self.requests.append(request)
        while self.hold_attempts:
            activity.heartbeat()
            await asyncio.sleep(0.05)
        failure = self.failures.get(request.offering.location)
        if failure is not None:
            return AttemptOutcome(failure=failure)
        node = NodeHandle(rank=0, instance_id=f"{request.cluster_name}-0", ip="10.0.0.1", runtime_dir="/n")
        handle = ClusterHandle(
            cluster_name=request.cluster_name,
            offering=request.offering,
            use_spot=request.use_spot,
            nodes=[node],
        )
        return AttemptOutcome(handle=handle)

    @activity.defn(name="terminate")
    async def terminate(self, handle: ClusterHandle) -> None:
        self.calls.append(f"terminate {handle.offering.location}")

    def workflows(self) -> list[type]:
        return [*super().workflows(), LaunchWorkflow, LockLeaseWorkflow]

    def long_activities(self) -> list[Callable[..., Any]]:
        return [*super().long_activities(), self.provision_attempt]

    def short_activities(self) -> list[Callable[..., Any]]:
        # The real cluster activities: they start, update and ask about the real workflows.
        cluster = ClusterActivities(self.client)
        fakes = [a for a in super().short_activities() if a != self.launch_running]
        return [*fakes, cluster.open_cluster, cluster.submit_job, cluster.launch_running]

    def local_activities(self) -> list[Callable[..., Any]]:
        return [self.optimize]

    @property
    def attempted(self) -> list[str]:
        """Where attempts went, in order."""
        return [c.removeprefix("provision_attempt ") for c in self.calls if c.startswith("provision_attempt")]


async def start_launch(
    client: Client, cluster: str, task: Task, **fields: Any
) -> WorkflowHandle[LaunchWorkflow, LaunchResult]:
    """Start a launch as the CLI does (same search attributes), with ``fields`` of ``LaunchRequest``."""
    return await client.start_workflow(
        LaunchWorkflow.run,
        LaunchRequest(cluster_name=cluster, task=task, **fields),
        id=f"launch:{cluster}:{uuid.uuid4().hex[:8]}",
        task_queue=WORKFLOW_QUEUE,
        search_attributes=launch_search_attributes(cluster, "tester"),
    )
