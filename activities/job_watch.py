"""The cluster's job watcher: one activity follows every started job of a cluster (long task queue).

Why one per cluster and not one per job: a running job then holds no worker slot and writes no
history event while it runs. The watcher asks each node once per poll about all its jobs
(``NodeRuntime.watch_jobs``), heartbeats (heartbeats write no history), and returns as soon as
something changed: a job ended (its outcome, as ``wait_on_nodes`` decides it: exit code, failed
rank, a node lost), a node has a job newer than the ones it follows, which the workflow must
add, or a node went away (it may have taken such a job with it before the watcher saw it). The
workflow then re-arms it (``workflows.job_watch``). A killed worker's watcher is retried on
another one by Temporal (heartbeat timeout) and reads the jobs' state again from the nodes, where
the runner keeps it, so every end is reported once: in the one result Temporal records.

Each poll also ships the followed jobs' new output to the store (``activities.log_ship``), and an
ended job's rest and end marker before the end is reported: once ``skyhop logs`` sees the marker,
the job's record says it ended, or will on the next workflow task.

The same polling follows managed jobs' runs, each on its own cluster, in a watch hub's activity
(``activities.watch_hub``): a ``ClusterWatch`` per run, one question per node a poll.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict

from temporalio import activity

from skyhop.activities.log_ship import LogShipper
from skyhop.activities.models import WatchedJob, WatchJobsInput, WatchJobsResult
from skyhop.activities.node_jobs import (
    CALL_TIMEOUT_S,
    NODE_LOST_AFTER_S,
    JobTracker,
    PollPace,
)
from skyhop.contract import JOB_KEY_PREFIX
from skyhop.providers.base import ClusterHandle
from skyhop.providers.registry import get_provider
from skyhop.providers.runtime.errors import NodeGoneError, NodeUnreachableError
from skyhop.providers.runtime.jobs import JobOutcome, JobsQuery, JobsReport
from skyhop.storage.logs import log_store

__all__ = ["ClusterWatch", "watch_jobs"]


@activity.defn
async def watch_jobs(request: WatchJobsInput) -> WatchJobsResult:
    """Follow the cluster's started jobs until one ends, a newer one appears, or a node goes away."""
    watch = ClusterWatch(request)
    logs = _shippers(watch)
    pace = PollPace()
    while True:
        result = await watch.poll()
        # After the states were read: the poll that sees a job's end ships its last bytes.
        shipped = await _ship(logs, result)
        if result.ended or result.newer or result.gone:
            await watch.stop_ended(result)
            return result
        activity.heartbeat()
        await asyncio.sleep(pace.next(shipped))


def _shippers(watch: ClusterWatch) -> dict[int, LogShipper]:
    """A shipper per followed job that names its stream (each of its ranks, on its node)."""
    store = log_store()
    return {
        job.job_id: LogShipper(
            store,
            job.log,
            f"{JOB_KEY_PREFIX}{job.job_id}",
            [watch.runtimes[node] for node in job.nodes],
            beat=activity.heartbeat,
        )
        for job in watch.request.jobs
        if job.log
    }


async def _ship(logs: dict[int, LogShipper], result: WatchJobsResult) -> int:
    """Ship every job's new output, and an ended job's rest and end; the bytes shipped."""
    shipped = await asyncio.gather(
        *(shipper.finish() if job_id in result.ended else shipper.ship() for job_id, shipper in logs.items())
    )
    return sum(shipped)


class ClusterWatch:
    """What one watcher has heard from a cluster's nodes so far."""

    def __init__(self, request: WatchJobsInput) -> None:
        self.request = request
        self.trackers = {job.job_id: _tracker(request.handle, job) for job in request.jobs}
        provider = get_provider(request.handle.offering.provider)
        self.runtimes = [provider.runtime(node) for node in request.handle.nodes]
        """Each cluster node's runtime, made once: a hub asks thousands of clusters every cycle."""
        self.answered: dict[int, float] = {}
        """When each node last answered (only nodes that answered this watcher at least once)."""

    async def poll(self) -> WatchJobsResult:
        """Ask each node once about its undecided jobs and newer ones; what the answers decided.

        Every node is asked, not only those running followed jobs: a new job may start on any node,
        and a node that goes away (its folder removed, or silent for ``NODE_LOST_AFTER_S``) may have
        taken a job with it that started after this watcher was armed, before it saw the job: the
        workflow then re-arms a watcher that follows that job too (once per node: ``gone``).
        """
        request = self.request
        asked: dict[int, list[tuple[int, int]]] = defaultdict(list)
        """Cluster node -> (job id, the job's rank on it) still undecided."""
        for job in request.jobs:
            for rank in self.trackers[job.job_id].asking():
                asked[job.nodes[rank]].append((job.job_id, rank))
        known = [f"{JOB_KEY_PREFIX}{job_id}" for job_id in request.known]
        queries = [
            JobsQuery(
                keys=[self.trackers[job_id].key for job_id, _ in asked[node]],
                prefix=JOB_KEY_PREFIX,
                newer_than=request.newer_than,
                known=known,
            )
            for node in range(len(request.handle.nodes))
        ]
        reports: list[JobsReport | Exception]
        if len(queries) == 1:  # every watch hub run: no task per question
            reports = [await self._answer(0, queries[0])]
        else:
            reports = await asyncio.gather(*(self._answer(node, query) for node, query in enumerate(queries)))
        result = WatchJobsResult()
        for node, report in enumerate(reports):
            for job_id, rank in asked[node]:
                tracker = self.trackers[job_id]
                answer = report.states.get(tracker.key) if isinstance(report, JobsReport) else report
                gone = isinstance(report, JobsReport) and not report.present
                outcome: JobOutcome | None = tracker.hear(rank, answer, folder_gone=gone)
                if outcome is not None and job_id not in result.ended:
                    result.ended[job_id] = outcome
            if self._went_away(node, report):
                result.gone.append(node)
            if isinstance(report, JobsReport):
                newer = {int(key.removeprefix(JOB_KEY_PREFIX)) for key in report.newer}
                result.newer = sorted(newer.union(result.newer))
        for job_id, tracker in self.trackers.items():
            outcome = tracker.outcome()
            if outcome is not None and job_id not in result.ended:
                result.ended[job_id] = outcome
        return result

    async def _answer(self, node: int, query: JobsQuery) -> JobsReport | Exception:
        """One bounded question (a timeout scope, not ``wait_for``'s extra task: a hub asks
        thousands of nodes a cycle; none for a node in this process, whose reads never wait); its
        failure is an answer too."""
        runtime = self.runtimes[node]
        try:
            if runtime.in_process:
                return await runtime.watch_jobs(query)
            async with asyncio.timeout(CALL_TIMEOUT_S):
                return await runtime.watch_jobs(query)
        except Exception as exc:
            return exc

    async def stop_ended(self, result: WatchJobsResult) -> None:
        """Stop each job that ended without success on its other nodes."""
        await asyncio.gather(*(self.trackers[i].stop_rest(o) for i, o in result.ended.items()))

    def _went_away(self, node: int, report: JobsReport | BaseException) -> bool:
        """Whether a node not reported gone yet has no runtime folder, or fell silent for too long.

        Every node has its folder from its preparation until it is removed, so a missing one is a
        removed node even if this watcher never saw it there: armed late, it may first ask after
        the removal, when the node already took a job this watcher does not follow yet with it.
        """
        now = time.monotonic()
        if isinstance(report, JobsReport):
            self.answered[node] = now
            return not report.present and node not in self.request.gone
        if isinstance(report, NodeGoneError):
            return node not in self.request.gone
        if isinstance(report, NodeUnreachableError | TimeoutError):
            return node in self.answered and now - self.answered[node] >= NODE_LOST_AFTER_S
        raise report


def _tracker(handle: ClusterHandle, job: WatchedJob) -> JobTracker:
    nodes = handle.model_copy(update={"nodes": [handle.nodes[node] for node in job.nodes]})
    return JobTracker(nodes, f"{JOB_KEY_PREFIX}{job.job_id}", len(job.nodes), started=job.running)
