"""skyhop's worker: workflow tasks, long activities and short activities, each with its own poller.

``skyhop worker`` runs one (``cli/worker_process.py`` is its process: configuration, the embedded
server, exit codes; this module only knows a connected client). Long work (provision,
sync, setup, jobs) can never starve short work (optimize, bookkeeping): they are separate task
queues with separate limits. SIGTERM or SIGINT shuts down cleanly: pollers stop, running
activities get a grace period.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest, ListSearchAttributesRequest
from temporalio.client import Client
from temporalio.worker import PollerBehaviorSimpleMaximum, Worker

from skyhop.activities import (
    cluster_ops,
    job_index,
    job_watch,
    jobs,
    planning,
    provisioning,
    storage,
    sync,
    watch_hub,
)
from skyhop.activities import serve as serving
from skyhop.activities.clusters import ClusterActivities
from skyhop.contract import LONG_QUEUE, SEARCH_ATTRIBUTES, SHORT_QUEUE, WORKFLOW_QUEUE, host_queue
from skyhop.providers.home import host_id
from skyhop.workflows.cluster import ClusterWorkflow
from skyhop.workflows.job_index import JobIndexWorkflow
from skyhop.workflows.launch import LaunchWorkflow
from skyhop.workflows.lock_lease import LockLeaseWorkflow
from skyhop.workflows.managed_job import ManagedJobWorkflow
from skyhop.workflows.managed_job_ids import ManagedJobIdsWorkflow
from skyhop.workflows.pool import PoolWorkflow
from skyhop.workflows.runner import TaskBoundRunner
from skyhop.workflows.service import ServiceWorkflow
from skyhop.workflows.ssh_pools import SSHPoolsWorkflow
from skyhop.workflows.watch_hub import WatchHubWorkflow

__all__ = [
    "CACHED_WORKFLOWS",
    "GC_PAUSE_LOGGED_S",
    "STICKY_TIMEOUT",
    "WORKFLOW_TASK_SLOTS",
    "CollectionPauses",
    "build_workers",
    "ensure_search_attributes",
    "serve",
]

log = logging.getLogger("skyhop.worker")


async def ensure_search_attributes(client: Client) -> None:
    """Register skyhop's search attributes if the server lacks them (idempotent)."""
    service = client.operator_service
    existing = await service.list_search_attributes(ListSearchAttributesRequest(namespace=client.namespace))
    missing = {
        name: IndexedValueType.Value(f"INDEXED_VALUE_TYPE_{kind.upper()}")
        for name, kind in SEARCH_ATTRIBUTES.items()
        if name not in existing.custom_attributes
    }
    if missing:
        await service.add_search_attributes(
            AddSearchAttributesRequest(namespace=client.namespace, search_attributes=missing)
        )


CACHED_WORKFLOWS = 3_000
"""Workflows kept in the worker's sticky cache; the least recently used are evicted beyond it.

A running managed job is idle (no activity, no timer: its watch hub signals its end), so 10,000
of them must not all stay in memory: an evicted one costs the worker nothing and replays its short
history (the attempt's events since its last continue-as-new) when its next event arrives. The 32
watch hubs are asked every cycle, so they stay cached and are never replayed for a query.

But each replay costs the worker about 12 ms of CPU, and a cancel is two workflow tasks: 1,000
jobs cancelled at once took 15.7 s with all of them cached, and 35 to 41 s with a cache of 100,
the worker's one core the bound. A cached job costs about 70 KiB, so 3,000 keep the jobs touched
last (the ones a user just launched, and cancels) cached at 10,000 jobs within 100 KB per job.
"""


STICKY_TIMEOUT = timedelta(seconds=60)
"""How long a cached workflow's next task waits for this worker before any worker takes it, and
replays it: the SDK's 10 s sent most of a burst there (1,000 jobs cancelled at once: 783 of their
first tasks timed out, and the whole cancel took 36 s instead of 20). The cost is a killed
worker's: its workflows' next tasks and queries wait this long before another worker answers.
``SKYHOP_WORKER_STICKY_TIMEOUT_S`` changes it (the tests, which kill workers, use 10 s)."""


WORKFLOW_TASK_SLOTS = 20
"""Workflow tasks this worker runs at once. Running workflow code is CPU work under one GIL, so
more at once only makes each slower: with 100, a burst (hundreds of jobs starting, or relaunching
after preemptions) made every task take longer than its 10 s timeout, so each was done again and
the hubs' heartbeats starved (congestion collapse). Waiting tasks wait in the server's queue. Not
fewer: a task stays open (and holds its slot) while its local activity runs, and every relaunch
re-optimizes as one (and a managed job's reports of its end are ones); with 8, 300 jobs took 352 s
to start, against 175 s with 100 (on a machine less loaded then: a hint, not a measure). Nor more
with fewer threads: 60 slots on 20 activation threads cancelled 1,000 jobs no faster (their tasks
waited in the server's matching, not for a slot) and doubled relaunch decisions' latency."""


WORKFLOW_TASK_POLLS = 10
"""Polls for workflow tasks (and queries) open at once, out of ``WORKFLOW_TASK_SLOTS`` (core opens a
poll only for a slot it holds; 4 in 5 of them on this worker's sticky queue). The SDK's 5 left
tasks waiting in the server's queue while slots were free: at 1,000 managed jobs a relaunch
decision's task waited about 2 s there, with the worker's event loop idle half the time. A poll for
every slot (20) took tasks from a burst's sticky backlog sooner: at 10,000 jobs the decision's p50 /
p99 were 1.17 / 2.79 and 1.22 / 2.40 s, against 2.25 / 2.89 s with 10. But those two runs launched
every job in 1,570 s, against 1,274 and 1,398 s with 10, and ``jobs queue`` took 1.25 s, against
0.94 and 0.97 s: kept at 10 until more runs tell which way it is."""


GC_PAUSE_LOGGED_S = 1.0
"""A garbage collection that takes this long is logged: the collector stops the whole process, so
every workflow task, activity and heartbeat of the worker waits for it. A full collection walks
every object the worker holds; with 10,000 managed jobs (over a million objects) one took 1 to
4.5 s, every 10 to 45 s while jobs were launched, reported or cancelled by the thousand."""


class CollectionPauses:
    """A ``gc.callbacks`` hook that logs each collection of at least ``GC_PAUSE_LOGGED_S``, so a
    stall seen elsewhere (a late query answer, a slow relaunch) can be told apart from one here."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = self._clock()
            return
        took = self._clock() - self._started
        if took >= GC_PAUSE_LOGGED_S:
            log.warning(
                "collecting garbage paused this worker for %.1f s (generation %d, %d objects freed)",
                took,
                info["generation"],
                info["collected"],
            )


def build_workers(
    client: Client,
    *,
    long_slots: int = 200,
    short_slots: int = 50,
    cached_workflows: int = CACHED_WORKFLOWS,
    sticky_timeout: timedelta = STICKY_TIMEOUT,
) -> list[Worker]:
    """The pollers of a skyhop worker: workflow tasks, long and short activities (and this machine's
    twins of the activity queues).

    Long slots are for work that runs (provision, sync, setup, start) and the watchers: a cluster's
    one and the watch hubs' (``WATCH_HUB_SHARDS``); a running managed job holds none.
    """
    cluster_activities = ClusterActivities(client)
    workers = [
        Worker(
            client,
            task_queue=WORKFLOW_QUEUE,
            workflows=[
                LaunchWorkflow,
                ClusterWorkflow,
                LockLeaseWorkflow,
                ManagedJobWorkflow,
                ManagedJobIdsWorkflow,
                JobIndexWorkflow,
                WatchHubWorkflow,
                ServiceWorkflow,
                SSHPoolsWorkflow,
                PoolWorkflow,
            ],
            # Local activities, with no task queue round trip: failover re-optimizes between
            # attempts; a managed job reports its end to the job index, and a cancel tells its hub.
            activities=[planning.optimize, job_index.index_job_row, watch_hub.forget_run],
            max_concurrent_workflow_tasks=WORKFLOW_TASK_SLOTS,
            workflow_task_poller_behavior=PollerBehaviorSimpleMaximum(WORKFLOW_TASK_POLLS),
            max_cached_workflows=cached_workflows,
            sticky_queue_schedule_to_start_timeout=sticky_timeout,
            workflow_runner=TaskBoundRunner(),
        ),
    ]
    long_activities: list[Callable[..., Any]] = [
        provisioning.provision_attempt,
        provisioning.terminate,
        sync.sync_workdir,
        sync.sync_file_mounts,
        storage.prepare_buckets,
        storage.attach_storage,
        storage.detach_storage,
        storage.delete_buckets,
        jobs.run_setup,
        jobs.start_job,
        jobs.start_managed_run,
        jobs.leave_cluster,
        job_watch.watch_jobs,
        watch_hub.watch_followed,
        # Only for clusters started before job watchers, until they continue as new
        # (``workflows.job_watch.JOB_EVENTS_PATCH``).
        jobs.wait_job,
        cluster_ops.stop_cluster,
        cluster_ops.start_cluster,
        serving.watch_for_held,
        cluster_activities.down_cluster,
    ]
    short_activities: list[Callable[..., Any]] = [
        planning.optimize,
        cluster_activities.open_cluster,
        cluster_activities.launch_running,
        cluster_activities.submit_job,
        cluster_activities.cancel_cluster_job,
        cluster_ops.cancel_jobs,
        cluster_ops.probe_cluster,
        job_index.index_job_row,  # a managed job's reports but those of its end
        watch_hub.follow_run,
        serving.sync_load_balancer,
        serving.load_balancer_stats,
        serving.stop_load_balancer,
        serving.choose_replica_port,
        serving.probe_replica,
    ]
    host = host_id()
    # Each queue also has this machine's twin, where the activities of clusters whose nodes are
    # this machine's folders (``local``) wait for it (``workflows.options.queue_for``).
    return workers + [
        Worker(
            client,
            task_queue=queue,
            activities=activities,
            max_concurrent_activities=slots,
            graceful_shutdown_timeout=timedelta(seconds=5),
        )
        for queue, activities, slots in (
            (LONG_QUEUE, long_activities, long_slots),
            (host_queue(LONG_QUEUE, host), long_activities, long_slots),
            (SHORT_QUEUE, short_activities, short_slots),
            (host_queue(SHORT_QUEUE, host), short_activities, short_slots),
        )
    ]


async def serve(
    client: Client,
    ready_file: str | None = None,
    *,
    cached_workflows: int = CACHED_WORKFLOWS,
    sticky_timeout: timedelta = STICKY_TIMEOUT,
) -> None:
    """Register search attributes, poll until SIGTERM/SIGINT, then shut down cleanly."""
    try:
        await ensure_search_attributes(client)
    except Exception as exc:  # e.g. Temporal Cloud, where an admin registers them
        log.warning("could not register search attributes (%s); register %s", exc, SEARCH_ATTRIBUTES)
    workers = build_workers(client, cached_workflows=cached_workflows, sticky_timeout=sticky_timeout)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    gc.callbacks.append(CollectionPauses())
    async with _all(workers):
        if ready_file:
            Path(ready_file).write_text(str(os.getpid()))
        log.info(
            "worker polling %s, %s, %s (and this machine's %s) on %s",
            WORKFLOW_QUEUE,
            LONG_QUEUE,
            SHORT_QUEUE,
            host_queue("*", host_id()),
            client.service_client.config.target_host,
        )
        await stop.wait()
    log.info("worker stopped")


class _all:
    """Run several workers as one async context (they shut down together)."""

    def __init__(self, workers: list[Worker]) -> None:
        self.workers = workers

    async def __aenter__(self) -> None:
        for worker in self.workers:
            await worker.__aenter__()

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.gather(*(w.shutdown() for w in self.workers))
