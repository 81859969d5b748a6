"""The cluster's job watcher: one activity follows every started job of a cluster (long task queue).

Why one per cluster and not one per job: a running job then holds no worker slot and writes no
history event while it runs. The watcher asks each node once per poll about all its jobs
(``NodeRuntime.watch_jobs``), heartbeats (heartbeats write no history), and returns as soon as
something changed: a job ended (its outcome, as ``wait_on_nodes`` decides it: exit code, failed
rank, a node lost), or a node has a job newer than the ones it follows, which the workflow must
add. The workflow then re-arms it (``workflows.job_watch``). A killed worker's watcher is retried on
another one by Temporal (heartbeat timeout) and reads the jobs' state again from the nodes, where
the runner keeps it, so every end is reported once: in the one result Temporal records.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict

from temporalio import activity

from activities.models import WatchedJob, WatchJobsInput, WatchJobsResult
from activities.node_jobs import CALL_TIMEOUT_S, POLL_FIRST_S, POLL_MAX_S, JobTracker
from providers.base import ClusterHandle
from providers.registry import get_provider
from providers.runtime.jobs import JobOutcome, JobsQuery, JobsReport
from workflows.contract import JOB_KEY_PREFIX

__all__ = ["watch_jobs"]


@activity.defn
async def watch_jobs(request: WatchJobsInput) -> WatchJobsResult:
    """Follow the cluster's started jobs until one ends or a newer one appears on a node."""
    trackers = {job.job_id: _tracker(request.handle, job) for job in request.jobs}
    poll = POLL_FIRST_S
    while True:
        result = await _poll(request, trackers)
        if result.ended or result.newest is not None:
            await asyncio.gather(*(trackers[i].stop_rest(o) for i, o in result.ended.items()))
            return result
        activity.heartbeat()
        await asyncio.sleep(poll)
        poll = min(poll * 2, POLL_MAX_S)


def _tracker(handle: ClusterHandle, job: WatchedJob) -> JobTracker:
    nodes = handle.model_copy(update={"nodes": [handle.nodes[node] for node in job.nodes]})
    return JobTracker(nodes, f"{JOB_KEY_PREFIX}{job.job_id}", len(job.nodes), started=job.running)


async def _poll(request: WatchJobsInput, trackers: dict[int, JobTracker]) -> WatchJobsResult:
    """Ask every node once about the undecided ranks of the jobs it runs; what that decided."""
    asked: dict[int, list[tuple[int, int]]] = defaultdict(list)
    """Cluster node -> (job id, the job's rank on it) still undecided."""
    for job in request.jobs:
        for rank in trackers[job.job_id].asking():
            asked[job.nodes[rank]].append((job.job_id, rank))
    provider = get_provider(request.handle.offering.provider)
    nodes = sorted(asked)
    reports = await asyncio.gather(
        *(
            asyncio.wait_for(
                provider.runtime(request.handle.nodes[node]).watch_jobs(
                    JobsQuery(
                        keys=[trackers[job_id].key for job_id, _ in asked[node]],
                        prefix=JOB_KEY_PREFIX,
                        newer_than=request.newer_than,
                    )
                ),
                CALL_TIMEOUT_S,
            )
            for node in nodes
        ),
        return_exceptions=True,
    )
    result = WatchJobsResult()
    for node, report in zip(nodes, reports, strict=True):
        for job_id, rank in asked[node]:
            tracker = trackers[job_id]
            answer = report.states.get(tracker.key) if isinstance(report, JobsReport) else report
            outcome: JobOutcome | None = tracker.hear(rank, answer)
            if outcome is not None and job_id not in result.ended:
                result.ended[job_id] = outcome
        if isinstance(report, JobsReport) and report.newer:
            newest = max(int(key.removeprefix(JOB_KEY_PREFIX)) for key in report.newer)
            result.newest = max(result.newest or 0, newest)
    for job_id, tracker in trackers.items():
        outcome = tracker.outcome()
        if outcome is not None and job_id not in result.ended:
            result.ended[job_id] = outcome
    return result
