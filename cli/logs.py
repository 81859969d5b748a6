"""Streaming a job's or a setup's log from the store, as it is written.

Workers ship logs from the nodes to the store (``activities.log_ship``, ``storage.logs``); the CLI
reads them there, so it needs only Temporal and the store, never the nodes. Not through workflow
history: a busy job's output would flood it.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, BinaryIO, TypeVar

from skyhop.cli.failures import Patience, asked_again, is_not_found
from skyhop.cli.output import info
from skyhop.contract import (
    ClusterQuery,
    JobStatus,
    LaunchQuery,
    LaunchStage,
    SearchAttribute,
    WorkflowKind,
    cluster_workflow_id,
)
from skyhop.contract.clusters import ClusterRecord, JobRecord
from skyhop.providers.registry import get_provider
from skyhop.providers.runtime.jobs import JobOutcome, combine_node_states
from skyhop.storage.logs import LogReader, job_stream, log_store, setup_stream

if TYPE_CHECKING:
    from temporalio.client import Client

    from skyhop.providers.base import ClusterHandle
    from skyhop.storage.content import ContentStore

__all__ = [
    "JobNotFoundError",
    "LaunchFailedError",
    "LogTail",
    "NodeLogTail",
    "cluster_record",
    "find_job",
    "follow_cluster",
    "follow_job",
    "print_job_status",
]

T = TypeVar("T")

_RECORD_CHECK_S = 1.0
_STORE_POLL_MAX_S = 0.25
"""A follower lists the store at least this often: with the watcher's poll, the log's latency."""
_END_CHECK_S = 0.1
"""How often a follower that read the end marker asks whether the record says the job ended."""
_END_MARKER_WAIT_S = 10.0
"""How long after its record says it ended a started job's end marker is waited for."""


class JobNotFoundError(LookupError):
    """The cluster or job named on the command line does not exist."""


class LaunchFailedError(RuntimeError):
    """The launch whose setup was being followed failed (the message is its error)."""


class _RankLines:
    """Writes ranks' output: as it comes for one node, line by line with a rank prefix for several."""

    def __init__(self, ips: list[str], out: BinaryIO) -> None:
        self.ips = ips
        self.out = out
        self.pending = [b""] * len(ips)
        """Each rank's unfinished last line (several nodes; one node: only after ``skip_to_last``)."""

    def _write(self, rank: int, chunk: bytes) -> None:
        if len(self.ips) == 1:
            self.out.write(self.pending[0] + chunk)
            self.pending[0] = b""
            return
        lines = (self.pending[rank] + chunk).split(b"\n")
        self.pending[rank] = lines.pop()
        self._write_lines(rank, lines)

    def _write_last(self, rank: int, text: bytes, count: int) -> None:
        """Write the last ``count`` complete lines of ``text``; keep its unfinished line pending."""
        lines = text.split(b"\n")
        self.pending[rank] = lines.pop()
        kept = lines[-count:] if count > 0 else []
        if len(self.ips) == 1:
            self.out.write(b"".join(line + b"\n" for line in kept))
        else:
            self._write_lines(rank, kept)

    def _write_lines(self, rank: int, lines: list[bytes]) -> None:
        prefix = f"(rank {rank}, {self.ips[rank]}) ".encode()
        self.out.write(b"".join(prefix + line + b"\n" for line in lines))

    def flush_partial(self) -> None:
        """Write unterminated last lines (multi-node output is line-prefixed)."""
        for rank, rest in enumerate(self.pending):
            if rest and len(self.ips) == 1:
                self.out.write(rest)
            elif rest:
                self.out.write(f"(rank {rank}, {self.ips[rank]}) ".encode() + rest + b"\n")
        self.pending = [b""] * len(self.pending)
        self.out.flush()


class LogTail(_RankLines):
    """Reads what is new of a log stream in the store (``storage.logs``), one reader per rank.

    The workers ship each job's and setup's output there as it is written, so following a log
    needs only the store: no node key, no path to a node, no worker's disk.
    """

    def __init__(self, stream: str, ips: list[str], out: BinaryIO, store: ContentStore | None = None) -> None:
        super().__init__(ips, out)
        self.store = store or log_store()
        self.readers = [LogReader(self.store, stream, rank) for rank in range(len(ips))]
        self.read_any = False

    @property
    def ended(self) -> bool:
        """Every rank's end marker was read: the log is complete."""
        return all(reader.ended for reader in self.readers)

    async def pump(self) -> bool:
        """Write whatever is new; True if anything was."""
        chunks = await asyncio.gather(*(asyncio.to_thread(reader.read) for reader in self.readers))
        for rank, chunk in enumerate(chunks):
            if chunk:
                self._write(rank, chunk)
        self.out.flush()
        wrote = any(chunks)
        self.read_any = self.read_any or wrote or self.ended
        return wrote

    async def skip_to_last(self, count: int) -> None:
        """Write only the last ``count`` complete lines so far of each rank; ``pump`` goes on from there."""
        for rank, reader in enumerate(self.readers):
            parts = []
            while chunk := await asyncio.to_thread(reader.read):
                parts.append(chunk)
            self._write_last(rank, b"".join(parts), count)
        self.out.flush()


class NodeLogTail(_RankLines):
    """Reads what is new in one node job's log straight from its nodes (the provider's runtime).

    Needs node access from this process: only ``serve logs`` (no watcher ships a replica's log
    yet) and the latency benchmark's side-by-side use it.
    """

    def __init__(self, handle: ClusterHandle, key: str, num_nodes: int, out: BinaryIO) -> None:
        super().__init__([node.ip for node in handle.nodes[:num_nodes]], out)
        provider = get_provider(handle.offering.provider)
        self.runtimes = [provider.runtime(node) for node in handle.nodes[:num_nodes]]
        self.key = key
        self.offsets = [0] * num_nodes

    async def pump(self) -> bool:
        """Write whatever is new; True if anything was."""
        chunks = await asyncio.gather(
            *(rt.read_log(self.key, off) for rt, off in zip(self.runtimes, self.offsets, strict=True))
        )
        for rank, chunk in enumerate(chunks):
            if chunk:
                self.offsets[rank] += len(chunk)
                self._write(rank, chunk)
        self.out.flush()
        return any(chunks)

    async def outcome(self) -> JobOutcome | None:
        """The job's outcome once every node has decided it, else None."""
        states = await asyncio.gather(*(rt.job_state(self.key) for rt in self.runtimes))
        return combine_node_states(list(states))


async def cluster_record(client: Client, cluster_name: str, *, patient: bool = False) -> ClusterRecord:
    """The cluster's record, by query; JobNotFoundError when there is no such cluster.

    ``patient``: a query that times out (no worker runs the cluster's workflow: one crashed, or is
    stuck) is asked again, for a follower, which outlives a worker crash, instead of ending it.
    """
    from temporalio.service import RPCError

    handle = client.get_workflow_handle(cluster_workflow_id(cluster_name))
    try:
        return await _asked_patiently(
            lambda: asked_again(lambda: handle.query(ClusterQuery.STATUS, result_type=ClusterRecord)),
            f"Cluster {cluster_name}'s workflow" if patient else None,
        )
    except RPCError as exc:
        if is_not_found(exc):
            raise JobNotFoundError(f"cluster {cluster_name!r} not found; see 'skyhop status'") from None
        raise


async def _asked_patiently(ask: Callable[[], Awaitable[T]], who: str | None) -> T:
    """``ask()``, asked again while it times out (no worker answers ``who``'s query: one crashed,
    or the machine is too busy), saying so once; None: not patient, the timeout is raised."""
    if who is None:
        return await ask()
    waiting = f"{who} does not answer (is a worker running?); waiting ..."
    return await Patience(waiting, pause_s=_RECORD_CHECK_S).send(ask)


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

    ``tail_lines`` starts from the last lines written so far instead of the beginning. The log is
    read from the store; a followed log ends with its end marker, which the job's watcher writes
    before it reports the end, so the record says the job ended right after.
    """
    record, job = await find_job(client, cluster_name, job_id, patient=follow)
    if job.status == JobStatus.PENDING:
        if not follow:
            info(f"Job {job.job_id} is PENDING: it waits for resources on the cluster and has no output yet.")
            return job
        record, job = await _wait_until_placed(client, cluster_name, job)
    if record.handle is None:
        raise JobNotFoundError(f"cluster {cluster_name!r} has no nodes to read job {job.job_id}'s log from")
    ips = [node.ip for node in job.handle_in(record.handle).nodes]
    tail = LogTail(job_stream(job.task_id), ips, out or sys.stdout.buffer)
    if tail_lines is not None:
        await tail.skip_to_last(tail_lines)
    poll, checked = 0.02, time.monotonic()
    recorded_end: float | None = None
    while True:
        wrote = await tail.pump()
        if tail.ended or not follow:
            break
        if job.status.done:
            # A job that never started has no log; one that did gets its end marker shortly.
            recorded_end = recorded_end or time.monotonic()
            if job.started_at is None or time.monotonic() - recorded_end > _END_MARKER_WAIT_S:
                break
        if time.monotonic() - checked > _RECORD_CHECK_S:
            job = _find(await cluster_record(client, cluster_name, patient=True), job.job_id)
            checked = time.monotonic()
        poll = 0.02 if wrote else min(poll * 1.5, _STORE_POLL_MAX_S)
        await asyncio.sleep(poll)
    tail.flush_partial()
    if follow and not tail.ended and job.started_at is not None and not tail.read_any:
        info(
            f"Job {job.job_id}'s output is not in the store {tail.store.url}: the CLI and the workers "
            "must use the same store (store.url in ~/.skyhop/config.yaml, or SKYHOP_STORE_URL)"
        )
    while follow and not job.status.done:
        await asyncio.sleep(_END_CHECK_S)
        job = _find(await cluster_record(client, cluster_name, patient=True), job.job_id)
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

    Setup's log is in the store, with one rank per node the launch provisioned; the job id is in the
    launch's progress once it has submitted the job.
    """
    from skyhop.contract import setup_key
    from skyhop.contract.clusters import LaunchProgress

    handle = client.get_workflow_handle(launch_id)
    tail: LogTail | None = None
    announced = False
    while True:
        progress: LaunchProgress = await _asked_patiently(
            lambda: handle.query(LaunchQuery.PROGRESS, result_type=LaunchProgress),
            f"Launch {launch_id}" if follow else None,
        )
        if tail is None and progress.handle is not None:
            ips = [node.ip for node in progress.handle.nodes]
            tail = LogTail(setup_stream(setup_key(launch_id)), ips, sys.stdout.buffer)
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
