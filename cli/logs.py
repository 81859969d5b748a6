"""Streaming a job's log straight from its nodes, as it is written.

Logs are read from the nodes through the provider's runtime (a file read locally, the node
runner over SSH), not through workflow history: a busy job's output would flood it.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections import deque
from typing import TYPE_CHECKING, BinaryIO

from skyhop.cli.failures import asked_again, is_not_found
from skyhop.cli.output import info
from skyhop.contract import (
    ClusterQuery,
    ClusterRecord,
    JobRecord,
    JobStatus,
    LaunchQuery,
    LaunchStage,
    SearchAttribute,
    WorkflowKind,
    cluster_workflow_id,
)
from skyhop.providers.registry import get_provider
from skyhop.providers.runtime.jobs import JobOutcome, combine_node_states

if TYPE_CHECKING:
    from temporalio.client import Client

    from skyhop.providers.base import ClusterHandle

__all__ = [
    "JobNotFoundError",
    "LaunchFailedError",
    "LogTail",
    "cluster_record",
    "find_job",
    "follow_cluster",
    "follow_job",
    "print_job_status",
]

_RECORD_CHECK_S = 1.0


class JobNotFoundError(LookupError):
    """The cluster or job named on the command line does not exist."""


class LaunchFailedError(RuntimeError):
    """The launch whose setup was being followed failed (the message is its error)."""


class LogTail:
    """Reads what is new in one node job's log on several nodes, prefixing lines by rank."""

    def __init__(self, handle: ClusterHandle, key: str, num_nodes: int, out: BinaryIO) -> None:
        provider = get_provider(handle.offering.provider)
        self.nodes = handle.nodes[:num_nodes]
        self.runtimes = [provider.runtime(node) for node in self.nodes]
        self.key = key
        self.out = out
        self.offsets = [0] * num_nodes
        self.pending = [b""] * num_nodes

    async def pump(self) -> bool:
        """Write whatever is new; True if anything was."""
        chunks = await asyncio.gather(
            *(rt.read_log(self.key, off) for rt, off in zip(self.runtimes, self.offsets, strict=True))
        )
        wrote = False
        for rank, chunk in enumerate(chunks):
            if not chunk:
                continue
            self.offsets[rank] += len(chunk)
            wrote = True
            if len(self.nodes) == 1:
                self.out.write(chunk)
                continue
            lines = (self.pending[rank] + chunk).split(b"\n")
            self.pending[rank] = lines.pop()
            self._write_lines(rank, lines)
        self.out.flush()
        return wrote

    async def skip_to_last(self, count: int) -> None:
        """Write only the last ``count`` complete lines so far on each node; ``pump`` goes on from there."""
        for rank, runtime in enumerate(self.runtimes):
            kept: deque[bytes] = deque(maxlen=count)
            offset, rest = 0, b""
            while chunk := await runtime.read_log(self.key, offset):
                offset += len(chunk)
                lines = (rest + chunk).split(b"\n")
                rest = lines.pop()
                kept.extend(lines)
            # An unfinished last line is read again by the next pump, whole.
            self.offsets[rank] = offset - len(rest)
            if len(self.nodes) == 1:
                self.out.write(b"".join(line + b"\n" for line in kept))
            else:
                self._write_lines(rank, list(kept))
        self.out.flush()

    def _write_lines(self, rank: int, lines: list[bytes]) -> None:
        prefix = f"(rank {rank}, {self.nodes[rank].ip}) ".encode()
        self.out.write(b"".join(prefix + line + b"\n" for line in lines))

    def flush_partial(self) -> None:
        """Write unterminated last lines (multi-node output is line-prefixed)."""
        for rank, rest in enumerate(self.pending):
            if rest:
                self.out.write(f"(rank {rank}, {self.nodes[rank].ip}) ".encode() + rest + b"\n")
        self.pending = [b""] * len(self.pending)
        self.out.flush()

    async def outcome(self) -> JobOutcome | None:
        """The job's outcome once every node has decided it, else None."""
        states = await asyncio.gather(*(rt.job_state(self.key) for rt in self.runtimes))
        return combine_node_states(list(states))


async def cluster_record(client: Client, cluster_name: str, *, patient: bool = False) -> ClusterRecord:
    """The cluster's record, by query; JobNotFoundError when there is no such cluster.

    ``patient``: a query that times out (no worker runs the cluster's workflow: one crashed, or is
    stuck) is asked again, for a follower, which outlives a worker crash, instead of ending it.
    """
    from temporalio.service import RPCError, RPCStatusCode

    handle = client.get_workflow_handle(cluster_workflow_id(cluster_name))
    said = False
    while True:
        try:
            record: ClusterRecord = await asked_again(
                lambda: handle.query(ClusterQuery.STATUS, result_type=ClusterRecord)
            )
            return record
        except RPCError as exc:
            if is_not_found(exc):
                raise JobNotFoundError(f"cluster {cluster_name!r} not found; see 'skyhop status'") from None
            timed_out = exc.status in (RPCStatusCode.CANCELLED, RPCStatusCode.DEADLINE_EXCEEDED)
            if not (patient and timed_out):
                raise
            if not said:
                info(f"Cluster {cluster_name}'s workflow does not answer (is a worker running?); waiting ...")
                said = True
        await asyncio.sleep(_RECORD_CHECK_S)


async def find_job(
    client: Client, cluster_name: str, job_id: int | None, *, patient: bool = False
) -> tuple[ClusterRecord, JobRecord]:
    """The cluster's record and its job ``job_id`` (the latest job when None)."""
    record = await cluster_record(client, cluster_name, patient=patient)
    if not record.jobs:
        raise JobNotFoundError(f"cluster {cluster_name!r} has no jobs yet")
    return record, _find(record, job_id if job_id is not None else record.jobs[-1].job_id)


async def follow_job(
    client: Client,
    cluster_name: str,
    job_id: int | None,
    *,
    follow: bool = True,
    tail_lines: int | None = None,
    out: BinaryIO | None = None,
) -> JobRecord:
    """Print the job's log (following it until it ends, unless ``follow`` is False); its final record.

    ``tail_lines`` starts from the last lines written so far instead of the beginning.
    """
    record, job = await find_job(client, cluster_name, job_id, patient=follow)
    if job.status == JobStatus.PENDING:
        if not follow:
            info(f"Job {job.job_id} is PENDING: it waits for resources on the cluster and has no output yet.")
            return job
        record, job = await _wait_until_placed(client, cluster_name, job)
    if record.handle is None:
        raise JobNotFoundError(f"cluster {cluster_name!r} has no nodes to read job {job.job_id}'s log from")
    tail = LogTail(job.handle_in(record.handle), job.key, job.num_nodes, out or sys.stdout.buffer)
    if tail_lines is not None:
        await tail.skip_to_last(tail_lines)
    poll, checked = 0.02, time.monotonic()
    while True:
        wrote = await tail.pump()
        outcome = await tail.outcome()
        if outcome is not None or not follow or job.status.done:
            await tail.pump()
            tail.flush_partial()
            break
        if time.monotonic() - checked > _RECORD_CHECK_S:
            # A job can end without ever reaching its nodes (e.g. rejected, or cancelled while PENDING).
            job = _find(await cluster_record(client, cluster_name, patient=True), job.job_id)
            checked = time.monotonic()
        poll = 0.02 if wrote else min(poll * 1.5, 0.5)
        await asyncio.sleep(poll)
    if outcome is not None:
        job = job.model_copy(
            update={
                "status": JobStatus(outcome.status),
                "exit_code": outcome.exit_code,
                "error": outcome.error,
            }
        )
    return job


async def follow_cluster(
    client: Client, cluster_name: str, job_id: int | None, *, follow: bool, tail_lines: int | None
) -> JobRecord | None:
    """``skyhop logs``: ``follow_job``, except while a launch sets up a cluster that has no job yet.

    Then the setup's output comes first (followed as it is written), then the job the launch
    submits; None when not following and there is no job yet.
    """
    if job_id is None and not (await cluster_record(client, cluster_name)).jobs:
        launch_id = await _running_launch(client, cluster_name)
        if launch_id is not None:
            job_id = await _follow_setup(client, cluster_name, launch_id, follow=follow)
            if job_id is None:
                return None
    return await follow_job(client, cluster_name, job_id, follow=follow, tail_lines=tail_lines)


STATUS_EXIT_CODES = {
    JobStatus.SUCCEEDED: 0,
    JobStatus.FAILED: 100,
    JobStatus.FAILED_SETUP: 100,
    JobStatus.CANCELLED: 103,
}
"""``logs --status`` exit codes, SkyPilot's: 101 for a job that has not ended, 102 for no such job."""


async def print_job_status(client: Client, cluster_name: str, job_id: int | None) -> int:
    """Print ``Job N: STATUS`` (and why it failed); the exit code tells the status to scripts."""
    try:
        _, job = await find_job(client, cluster_name, job_id)
    except JobNotFoundError as exc:
        info(str(exc))
        return 102
    reason = f" ({job.error})" if job.error else ""
    print(f"Job {job.job_id}: {job.status.value}{reason}")
    return STATUS_EXIT_CODES.get(job.status, 101)


async def _wait_until_placed(
    client: Client, cluster_name: str, job: JobRecord
) -> tuple[ClusterRecord, JobRecord]:
    """Wait while the job is queued: which nodes its log is on is only known once it is placed."""
    info(f"Job {job.job_id} is PENDING: waiting for resources on cluster {cluster_name} ...")
    while True:
        await asyncio.sleep(_RECORD_CHECK_S)
        record = await cluster_record(client, cluster_name, patient=True)
        job = _find(record, job.job_id)
        if job.status != JobStatus.PENDING:
            return record, job


def _find(record: ClusterRecord, job_id: int) -> JobRecord:
    for job in record.jobs:
        if job.job_id == job_id:
            return job
    last = record.jobs[-1].job_id if record.jobs else 0
    raise JobNotFoundError(f"cluster {record.name!r} has no job {job_id}; its jobs are 1..{last}")


async def _running_launch(client: Client, cluster_name: str) -> str | None:
    """The id of a launch running on ``cluster_name`` (the oldest, which holds it first), if any."""
    query = (
        f"{SearchAttribute.KIND} = '{WorkflowKind.LAUNCH}' AND {SearchAttribute.CLUSTER} = '{cluster_name}'"
        " AND ExecutionStatus = 'Running'"
    )
    launches = [wf async for wf in client.list_workflows(query)]
    launches.sort(key=lambda wf: wf.start_time)
    return launches[0].id if launches else None


async def _follow_setup(client: Client, cluster_name: str, launch_id: str, *, follow: bool) -> int | None:
    """Write the launch's setup output as it comes; the job it then submits (None: not yet, no follow).

    Setup's log is on the nodes, known once the launch has provisioned them; the job id is in the
    launch's progress once it has submitted the job.
    """
    from skyhop.contract import LaunchProgress, setup_key

    handle = client.get_workflow_handle(launch_id)
    tail: LogTail | None = None
    announced = False
    while True:
        progress: LaunchProgress = await handle.query(LaunchQuery.PROGRESS, result_type=LaunchProgress)
        if tail is None and progress.handle is not None:
            nodes = len(progress.handle.nodes)
            tail = LogTail(progress.handle, setup_key(launch_id), nodes, sys.stdout.buffer)
        if tail is not None:
            await tail.pump()
        if not announced and progress.stage != LaunchStage.SETUP and not progress.stage.ended:
            info(f"Cluster {cluster_name} is being launched ({progress.stage}); its setup's output follows.")
            announced = True
        if progress.stage.ended or progress.job_id is not None or not follow:
            if tail is not None:
                await tail.pump()
                tail.flush_partial()
            if progress.stage == LaunchStage.FAILED:
                raise LaunchFailedError(f"launch {launch_id} failed: {progress.error}")
            return progress.job_id
        await asyncio.sleep(0.2)
