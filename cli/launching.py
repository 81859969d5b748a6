"""``skyhop launch`` and ``skyhop exec``: start the work, show its stages, stream the job."""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from typing import TYPE_CHECKING, Literal

from skyhop.cli.failures import is_not_found, is_stuck, while_busy
from skyhop.cli.output import EXIT_DETACHED, Ticker, fail, info
from skyhop.cli.session import current_user
from skyhop.contract import ClusterQuery, ClusterUpdate, JobStatus, LaunchQuery, LaunchStage
from skyhop.contract.clusters import JobRecord, LaunchResult
from skyhop.contract.failures import innermost_message
from skyhop.spec import Task

if TYPE_CHECKING:
    from temporalio.client import Client

    from skyhop.cli.logs import LogTail
    from skyhop.contract.clusters import FailoverAttempt, LaunchProgress

__all__ = ["exit_code_of", "run_exec", "run_launch", "say_launch_holding"]

_STAGE_TITLES = {
    LaunchStage.LOCK: "Waiting for the cluster",
    LaunchStage.OPTIMIZE: "Optimizing",
    LaunchStage.PROVISION: "Provisioning",
    LaunchStage.SYNC_WORKDIR: "Syncing workdir",
    LaunchStage.SYNC_FILE_MOUNTS: "Syncing file mounts",
    LaunchStage.SETUP: "Running setup",
    LaunchStage.EXEC: "Submitting job",
}


def exit_code_of(job: JobRecord) -> int:
    """The CLI's exit code for a finished job: the job's own, or 1 when it has none."""
    if job.status == JobStatus.SUCCEEDED:
        return 0
    return job.exit_code if job.exit_code not in (None, 0) else 1


async def run_launch(
    task: Task,
    cluster_name: str,
    *,
    detach: bool,
    idle_minutes: int | None,
    down: bool,
    retry_until_up: bool = False,
    minimize: Literal["cost", "time"] = "cost",
) -> int:
    """Start a LaunchWorkflow, print its stages as they happen, then stream the job."""
    from temporalio.client import WorkflowFailureError
    from temporalio.exceptions import CancelledError

    from skyhop.cli.packing import pack_task
    from skyhop.cli.session import open_client, web_ui_url
    from skyhop.contract import LAUNCH_WORKFLOW, WORKFLOW_QUEUE
    from skyhop.contract.clusters import LaunchProgress, LaunchRequest, LaunchResult
    from skyhop.contract.search import launch_search_attributes
    from skyhop.spec.limits import check_request_size

    user = current_user()
    request = LaunchRequest(
        cluster_name=cluster_name,
        task=task,
        user=user,
        idle_minutes=idle_minutes,
        down=down,
        retry_until_up=retry_until_up,
        minimize=minimize,
    )
    check_request_size(request, "launch request")  # before any upload: a refused request leaves nothing
    request = request.model_copy(update={"task": await pack_task(task)})
    check_request_size(request, "launch request")
    client = await open_client()
    workflow_id = f"launch:{cluster_name}:{uuid.uuid4().hex[:12]}"
    handle = await client.start_workflow(
        LAUNCH_WORKFLOW,
        request,
        id=workflow_id,
        task_queue=WORKFLOW_QUEUE,
        result_type=LaunchResult,
        search_attributes=launch_search_attributes(cluster_name, user),
    )
    ui = web_ui_url(workflow_id)
    info(f"Launch {workflow_id} started." + (f" Web UI: {ui}" if ui else ""))
    result_task = asyncio.ensure_future(handle.result())
    try:
        await _show_stages(handle, result_task, task)
        try:
            result = await result_task
        except WorkflowFailureError as exc:
            if isinstance(exc.cause, CancelledError):
                # The launch's own sentence says what a cancel left (a cluster that existed stays).
                progress = await handle.query(LaunchQuery.PROGRESS, result_type=LaunchProgress)
                fail(progress.error or "launch cancelled")
            fail(f"launch failed: {innermost_message(exc)}")
        if result.job_id is None:
            info(f"Cluster {cluster_name} is UP (the task has no 'run' command).")
            _hint_down(result, task, idle_minutes)
            return 0
        info(f"Job {result.job_id} submitted on cluster {cluster_name}.")
        if detach:
            info(f"Follow its log with: skyhop logs {cluster_name} {result.job_id}")
            return 0
        code = await _stream(client, cluster_name, result.job_id)
        _hint_down(result, task, idle_minutes)
        return code
    except (KeyboardInterrupt, asyncio.CancelledError):
        result_task.cancel()
        info(f"\nDetached; the launch goes on. See it with: skyhop status, or: skyhop logs {cluster_name}")
        return EXIT_DETACHED


def _hint_down(result: LaunchResult, task: Task, idle_minutes: int | None) -> None:
    """A launch never tears down (as in SkyPilot): say once, on the cluster it created, how to."""
    if not result.provisioned:
        return
    name = result.cluster_name
    autostop = idle_minutes is not None or task.resources.autostop is not None
    info(
        f"Cluster {name} is UP; `skyhop down {name}` when done"
        + ("." if autostop else " (or `-i MIN` autostop).")
    )


async def _show_stages(handle: object, result_task: asyncio.Future[object], task: Task) -> None:
    """Print each stage as it begins and ends, with its elapsed time; stream setup's output.

    On a terminal a ticker runs under the stage lines; it is erased however this ends.
    """
    ticker = Ticker(sys.stderr.isatty())
    try:
        await _follow_stages(handle, result_task, task, ticker)
    finally:
        ticker.clear()


async def _follow_stages(
    handle: object, result_task: asyncio.Future[object], task: Task, ticker: Ticker
) -> None:
    from temporalio.client import WorkflowHandle, WorkflowQueryFailedError
    from temporalio.service import RPCError

    from skyhop.cli.logs import LogTail
    from skyhop.contract import setup_key
    from skyhop.contract.clusters import LaunchProgress
    from skyhop.storage.logs import setup_stream

    assert isinstance(handle, WorkflowHandle)
    shown, printed = "", 0
    failover = _FailoverPrinter()
    setup_tail: LogTail | None = None
    while True:
        finished = result_task.done()
        try:
            progress = await handle.query(LaunchQuery.PROGRESS, result_type=LaunchProgress)
        except (RPCError, WorkflowQueryFailedError):  # the first query can race the workflow's first task
            progress = None
        if progress is not None:
            if setup_tail is None and progress.handle is not None and task.needs_setup:
                ips = [node.ip for node in progress.handle.nodes]
                setup_tail = LogTail(setup_stream(setup_key(handle.id)), ips, sys.stderr.buffer)
            # Counted from the launch's start: a continue-as-new drops the oldest from the list.
            for stage, seconds in progress.finished_stages[max(printed - progress.earlier_stages, 0) :]:
                ticker.clear()
                if stage == LaunchStage.SETUP and setup_tail is not None:
                    await setup_tail.pump()  # setup's own output comes before the line saying it ended
                    setup_tail.flush_partial()
                if stage in _STAGE_TITLES:
                    info(f"  ✓ {_STAGE_TITLES[stage]} ({seconds:.1f}s)")
            printed = progress.earlier_stages + len(progress.finished_stages)
            if progress.stage != shown and progress.stage in _STAGE_TITLES:
                detail = ""
                if progress.stage == LaunchStage.PROVISION and progress.chosen is not None:
                    chosen = progress.chosen
                    detail = f": {chosen.location} {chosen.instance_type} x{task.num_nodes}"
                ticker.clear()
                info(f"▸ {_STAGE_TITLES[progress.stage]}{detail} ...")
            if progress.stage == LaunchStage.SETUP and setup_tail is not None:
                ticker.clear()
                await setup_tail.pump()
            failover.show(progress, finished, ticker)
            shown = progress.stage
        if finished:
            break
        ticker.tick()
        await asyncio.wait([result_task], timeout=Ticker.FRAME_S)


class _FailoverPrinter:
    """Prints each failed provision attempt once the launch knows where it goes next."""

    def __init__(self) -> None:
        self.printed = 0
        """Attempts printed, counted from the launch's start (``progress.attempts`` drops the oldest)."""
        self.retry_at: float | None = None

    def show(self, progress: LaunchProgress, finished: bool, ticker: Ticker) -> None:
        self.printed = max(self.printed, progress.earlier_attempts)
        for attempt in progress.attempts[self.printed - progress.earlier_attempts :]:
            if attempt.next_location is None and not finished and progress.retry_at is None:
                break
            ticker.clear()
            info(f"  ✗ {_attempt_line(attempt)}")
            self.printed += 1
        if progress.retry_at is not None and progress.retry_at != self.retry_at:
            self.retry_at = progress.retry_at
            wait = max(progress.retry_at - time.time(), 0)
            ticker.clear()
            info(f"  Every candidate failed; searching again in {wait:.0f}s (--retry-until-up) ...")


def _attempt_line(attempt: FailoverAttempt) -> str:
    """``aws us-east-1a: capacity (InsufficientInstanceCapacity) — trying us-east-1b``."""
    line = f"{attempt.location}: {attempt.kind} ({attempt.code})"
    if attempt.next_location is None:
        return line
    provider, *place = attempt.next_location.split("/")
    where = place[-1] if provider == attempt.provider and place else " ".join([provider, *place[-1:]])
    return f"{line} — trying {where}"


async def _stream(client: Client, cluster_name: str, job_id: int) -> int:
    from skyhop.cli.logs import follow_job

    try:
        job = await follow_job(client, cluster_name, job_id)
    except (KeyboardInterrupt, asyncio.CancelledError):
        info(f"\nDetached; job {job_id} keeps running. Reattach with: skyhop logs {cluster_name} {job_id}")
        return EXIT_DETACHED
    code = exit_code_of(job)
    if job.status != JobStatus.SUCCEEDED:
        reason = f": {job.error}" if job.error else ""
        info(f"Job {job_id} {job.status.value} with exit code {job.exit_code}{reason}")
    return code


async def say_launch_holding(client: Client, cluster_id: str) -> None:
    """Before ``down``: name the launch holding the cluster, since ``down`` cancels it and waits for it."""
    from temporalio.client import WorkflowQueryFailedError
    from temporalio.service import RPCError

    from skyhop.contract import HolderKind
    from skyhop.contract.clusters import ClusterRecord, LaunchProgress

    try:
        record = await client.get_workflow_handle(cluster_id).query(
            ClusterQuery.STATUS, result_type=ClusterRecord
        )
        holder = record.holder
        if holder is None or holder.kind != HolderKind.LAUNCH:
            return  # free, or one of the cluster's own operations (stop, start): down waits for it
        launch = client.get_workflow_handle(holder.id)
        stage = (await launch.query(LaunchQuery.PROGRESS, result_type=LaunchProgress)).stage
    except (RPCError, WorkflowQueryFailedError):
        return  # no such cluster or launch: the update itself says so
    info(
        f"Cancelling launch {holder.id} (at stage {stage}), which holds cluster {record.name}; "
        "waiting for it to remove what it created ..."
    )


async def run_exec(task: Task, cluster_name: str, *, detach: bool) -> int:
    """Queue ``task`` on an UP cluster (no provisioning, no setup) and stream it."""
    from temporalio.client import WorkflowUpdateFailedError
    from temporalio.service import RPCError

    from skyhop.cli.packing import pack_task
    from skyhop.cli.session import open_client
    from skyhop.contract import cluster_workflow_id
    from skyhop.contract.clusters import JobSubmission
    from skyhop.spec.limits import check_request_size

    submission = JobSubmission(
        request_id=f"exec:{uuid.uuid4().hex}", task=task, user=current_user(), sync_workdir=task.has_workdir
    )
    check_request_size(submission, "job submission")  # before any upload: a refused request leaves nothing
    submission = submission.model_copy(update={"task": await pack_task(task, file_mounts=False)})
    check_request_size(submission, "job submission")
    client = await open_client()
    try:
        handle = client.get_workflow_handle(cluster_workflow_id(cluster_name))
        job = await while_busy(
            lambda: handle.execute_update(
                ClusterUpdate.SUBMIT_JOB, submission, id=submission.request_id, result_type=JobRecord
            )
        )
    except WorkflowUpdateFailedError as exc:
        fail(f"cannot run on cluster {cluster_name}: {innermost_message(exc)}")
    except RPCError as exc:
        if is_stuck(exc):
            fail(f"cluster {cluster_name} is BROKEN (its workflow is stuck); see: skyhop status")
        if not is_not_found(exc):
            raise
        fail(f"cluster {cluster_name!r} not found; launch it with: skyhop launch -c {cluster_name} TASK")
    info(f"Job {job.job_id} submitted on cluster {cluster_name}.")
    if detach:
        info(f"Follow it with: skyhop logs {cluster_name} {job.job_id}")
        return 0
    return await _stream(client, cluster_name, job.job_id)
