"""Activities through which a launch talks to a cluster's entity workflow (short task queue)."""

from __future__ import annotations

from temporalio import activity
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowUpdateFailedError
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from skyhop.activities.models import (
    CancelClusterJobInput,
    LaunchRunningInput,
    OpenClusterInput,
    SubmitJobInput,
)
from skyhop.contract import (
    CLUSTER_WORKFLOW,
    WORKFLOW_QUEUE,
    ClusterUpdate,
    ErrorType,
    LockSignal,
    cluster_workflow_id,
)
from skyhop.contract.clusters import CancelRequest, ClusterInput, ClusterRecord, JobRecord
from skyhop.contract.failures import innermost_message, is_unprocessed_update
from skyhop.contract.search import cluster_search_attributes

__all__ = ["ClusterActivities"]


class ClusterActivities:
    """Workflows cannot start workflows they do not parent, or send updates: these activities can."""

    def __init__(self, client: Client) -> None:
        self.client = client

    @activity.defn
    async def open_cluster(self, request: OpenClusterInput) -> None:
        """Start the cluster's entity workflow unless it is already running, and claim its lock.

        One signal-with-start: the claim reaches the run that is open now, or starts one. Sent
        apart, a ``down`` could end the cluster between the start and the claim, and the claim
        would find no workflow. A retried claim is harmless (the lock ignores a queued claimant).
        """
        claim = request.claim
        await self.client.start_workflow(
            CLUSTER_WORKFLOW,
            ClusterInput(record=ClusterRecord(name=request.cluster_name, user=request.user)),
            id=cluster_workflow_id(request.cluster_name),
            task_queue=WORKFLOW_QUEUE,
            search_attributes=cluster_search_attributes(request.cluster_name, request.user),
            **(
                {"start_signal": LockSignal.CLAIM.value, "start_signal_args": [claim]}
                if claim is not None
                else {"id_conflict_policy": WorkflowIDConflictPolicy.USE_EXISTING}
            ),
        )

    @activity.defn
    async def launch_running(self, request: LaunchRunningInput) -> bool:
        """Whether a run of the workflow ``request.workflow_id`` is running (the latest run: a launch
        that continued as new, or was reset, runs on under the same id)."""
        try:
            description = await self.client.get_workflow_handle(request.workflow_id).describe()
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                return False
            raise
        return description.status == WorkflowExecutionStatus.RUNNING

    @activity.defn
    async def submit_job(self, request: SubmitJobInput) -> JobRecord:
        """Queue a job on the cluster; the update id makes a retried submit return the same job."""
        handle = self.client.get_workflow_handle(cluster_workflow_id(request.cluster_name))
        try:
            job: JobRecord = await handle.execute_update(
                ClusterUpdate.SUBMIT_JOB.value,
                request.submission,
                id=f"submit:{request.submission.request_id}",
                result_type=JobRecord,
            )
            return job
        except WorkflowUpdateFailedError as exc:
            if is_unprocessed_update(exc):
                raise  # not run by the workflow: the activity's retry sends it again, same id
            raise ApplicationError(
                innermost_message(exc), type=ErrorType.SUBMIT_REJECTED, non_retryable=True
            ) from None

    @activity.defn
    async def down_cluster(self, cluster_name: str) -> None:
        """Tear the cluster down through its workflow (as ``skyhop down``); a cluster whose workflow
        is gone or ended is down already."""
        handle = self.client.get_workflow_handle(cluster_workflow_id(cluster_name))
        try:
            await handle.execute_update(ClusterUpdate.DOWN.value, result_type=ClusterRecord)
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise
        except WorkflowUpdateFailedError as exc:
            if is_unprocessed_update(exc):
                raise
            raise ApplicationError(innermost_message(exc)) from None

    @activity.defn
    async def cancel_cluster_job(self, request: CancelClusterJobInput) -> None:
        """Cancel one job on the cluster (stopped on its nodes); nothing if the cluster is gone."""
        handle = self.client.get_workflow_handle(cluster_workflow_id(request.cluster_name))
        try:
            await handle.execute_update(ClusterUpdate.CANCEL.value, CancelRequest(job_ids=[request.job_id]))
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise
