"""Streaming a job's log straight from its nodes, as it is written.

Logs are read from the nodes through the provider's runtime (a file read locally, the node
runner over SSH), not through workflow history: a busy job's output would flood it.
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import TYPE_CHECKING, BinaryIO

from providers.registry import get_provider
from providers.runtime.jobs import JobOutcome, combine_node_states
from workflows.contract import ClusterRecord, JobRecord, JobStatus, cluster_workflow_id

if TYPE_CHECKING:
    from temporalio.client import Client

    from providers.base import ClusterHandle

__all__ = ["LogTail", "JobNotFoundError", "cluster_record", "follow_job"]

_RECORD_CHECK_S = 1.0


class JobNotFoundError(LookupError):
    """The cluster or job named on the command line does not exist."""


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
            prefix = f"(rank {rank}, {self.nodes[rank].ip}) ".encode()
            self.out.write(b"".join(prefix + line + b"\n" for line in lines))
        self.out.flush()
        return wrote

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


async def cluster_record(client: Client, cluster_name: str) -> ClusterRecord:
    """The cluster's record, by query; JobNotFoundError when there is no such cluster."""
    from temporalio.service import RPCError

    try:
        record: ClusterRecord = await client.get_workflow_handle(cluster_workflow_id(cluster_name)).query(
            "status", result_type=ClusterRecord
        )
        return record
    except RPCError:
        raise JobNotFoundError(f"cluster {cluster_name!r} not found; see 'skyhop status'") from None


async def follow_job(
    client: Client, cluster_name: str, job_id: int | None, *, follow: bool = True, out: BinaryIO | None = None
) -> JobRecord:
    """Print the job's log (following it until it ends, unless ``follow`` is False); its final record."""
    record = await cluster_record(client, cluster_name)
    if not record.jobs:
        raise JobNotFoundError(f"cluster {cluster_name!r} has no jobs yet")
    job = _find(record, job_id if job_id is not None else record.jobs[-1].job_id)
    assert record.handle is not None
    tail = LogTail(record.handle, job.key, job.num_nodes, out or sys.stdout.buffer)
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
            job = _find(await cluster_record(client, cluster_name), job.job_id)
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


def _find(record: ClusterRecord, job_id: int) -> JobRecord:
    for job in record.jobs:
        if job.job_id == job_id:
            return job
    last = record.jobs[-1].job_id if record.jobs else 0
    raise JobNotFoundError(f"cluster {record.name!r} has no job {job_id}; its jobs are 1..{last}")
