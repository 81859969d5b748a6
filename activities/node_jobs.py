"""Running one job on several nodes and waiting for it, the way setup and run both need."""

from __future__ import annotations

import asyncio
import json
import time

from temporalio import activity
from temporalio.exceptions import ApplicationError

from skyhop.contract import ErrorType
from skyhop.providers.base import ClusterHandle, NodeRuntime
from skyhop.providers.registry import get_provider
from skyhop.providers.runtime.errors import NodeGoneError, NodeUnreachableError
from skyhop.providers.runtime.jobs import (
    ContainerSpec,
    ContainerStage,
    JobOutcome,
    JobSpec,
    NodeJobState,
    NodeJobStatus,
    combine_node_states,
)
from skyhop.spec import Task

__all__ = [
    "CALL_TIMEOUT_S",
    "LOG_POLL_S",
    "NODE_LOST_AFTER_S",
    "POLL_FIRST_S",
    "POLL_MAX_S",
    "WORKDIR",
    "JobTracker",
    "PollPace",
    "job_container",
    "is_lost",
    "install_programs",
    "job_env",
    "node_lost",
    "run_on_nodes",
    "start_on_nodes",
    "stop_if_cancelled",
    "wait_on_nodes",
]

WORKDIR = "workdir"
"""Where the task's workdir lands on a node, relative to its runtime folder (SkyPilot: ~/sky_workdir)."""

NODE_LOST_AFTER_S = 15.0
"""A node silent this long is lost: its job fails, naming it, and the cluster is degraded."""
CALL_TIMEOUT_S = 5.0
"""Bound on one question to a node (start, state): below the heartbeat timeout, so waits keep beating."""
CANCEL_TIMEOUT_S = 15.0
"""Bound on stopping a job on one node (the runner's SIGTERM grace is 5 s)."""
POLL_FIRST_S = 0.05
POLL_MAX_S = 1.0
"""Following a job, nodes are asked at most this far apart (a job's end shows within it)."""
LOG_POLL_S = 0.2
"""While a followed job writes output, its nodes are asked at most this far apart: the output's
latency to a follower (``storage.logs``), at a poll's cost only while there is output."""
_LOG_QUIET_POLLS = 10
"""Polls without output (about 2 s) after which the waits grow to ``POLL_MAX_S`` again: a job that
writes a line every second or so is not read a second late each time."""


class PollPace:
    """The waits between a followed job's polls: doubling up to ``LOG_POLL_S`` while the job writes
    output (and at its start), up to ``POLL_MAX_S`` once it has been quiet for a while."""

    def __init__(self) -> None:
        self.wait = POLL_FIRST_S
        self.quiet = 0
        """Polls in a row that shipped no output."""

    def next(self, shipped: int) -> float:
        """The wait after a poll that shipped ``shipped`` bytes of output."""
        self.quiet = 0 if shipped else self.quiet + 1
        self.wait = min(self.wait * 2, LOG_POLL_S if self.quiet <= _LOG_QUIET_POLLS else POLL_MAX_S)
        return self.wait


def job_env(handle: ClusterHandle, task: Task, rank: int, task_id: str) -> dict[str, str]:
    """The task's envs plus rank variables, under both SKYHOP_* and SKYPILOT_* names."""
    nodes = handle.nodes[: task.num_nodes]
    gpus = sum(handle.offering.accelerators.values())
    info = {
        "cluster_name": handle.cluster_name,
        "cloud": handle.offering.provider,
        "region": handle.offering.region,
        "zone": handle.offering.zone,
    }
    values = {
        "NODE_RANK": str(rank),
        "NUM_NODES": str(len(nodes)),
        "NODE_IPS": "\n".join(node.ip for node in nodes),
        "TASK_ID": task_id,
        "NUM_GPUS_PER_NODE": str(int(-(-gpus // 1))),
        "CLUSTER_INFO": json.dumps(info),
    }
    env = task.job_envs
    for name, value in values.items():
        env[f"SKYHOP_{name}"] = value
        env[f"SKYPILOT_{name}"] = value
    return env


def job_container(handle: ClusterHandle, task: Task, stage: ContainerStage) -> ContainerSpec | None:
    """The container a task's setup or run executes in (``image_id: docker:IMAGE``), or None: also
    where the provider's nodes already are that container (a Kubernetes pod runs the image itself)."""
    image = task.resources.docker_image
    if image is None or get_provider(handle.offering.provider).capabilities.container_nodes:
        return None
    binds = [target for target in task.file_mounts if target.startswith("/")]
    return ContainerSpec(
        image=image,
        stage=stage,
        binds=binds,
        gpus=bool(handle.offering.accelerators),
        run_options=task.config.docker.arguments,
    )


async def install_programs(handle: ClusterHandle) -> None:
    """Make sure every node has this worker's node programs (a no-op where it has them already):
    nodes brought up by an older worker may lack the storage tool that storage jobs run."""
    provider = get_provider(handle.offering.provider)
    await asyncio.gather(*(provider.runtime(node).prepare() for node in handle.nodes))


async def run_on_nodes(handle: ClusterHandle, specs: list[JobSpec], *, logs: str | None = None) -> JobOutcome:
    """Start ``specs[rank]`` on node ``rank`` and wait until the job is decided.

    Cancelled by the workflow while starting, the job is stopped on every node (``wait_on_nodes``
    does the same once it waits), so a cancelled setup leaves no process behind.
    """
    try:
        await start_on_nodes(handle, specs)
    except asyncio.CancelledError:
        await stop_if_cancelled(handle, specs[0].key, len(specs))
        raise
    return await wait_on_nodes(handle, specs[0].key, len(specs), logs=logs)


async def stop_if_cancelled(handle: ClusterHandle, key: str, num_nodes: int) -> None:
    """In an activity being cancelled: stop job ``key`` on its nodes if the workflow asked for it.

    Only an explicit cancel stops the job; any other end of the activity (worker shutdown,
    heartbeat timeout, the workflow continuing as new) leaves it running for the next attempt
    to re-attach to. The stop is shielded: the cancellation must not interrupt it.
    """
    details = activity.cancellation_details()
    if details is not None and details.cancel_requested:
        provider = get_provider(handle.offering.provider)
        runtimes = [provider.runtime(handle.nodes[rank]) for rank in range(num_nodes)]
        await asyncio.shield(_cancel(runtimes, key))


async def start_on_nodes(handle: ClusterHandle, specs: list[JobSpec]) -> None:
    """Start ``specs[rank]`` on node ``rank`` (a node that has the job already keeps it).

    A node that does not answer is asked again until it has been silent for ``NODE_LOST_AFTER_S``
    (or at once when it is gone for good: ``NodeGoneError``); then the job is stopped on the
    others and the start fails (``NodeLost``, not retried).
    """
    provider = get_provider(handle.offering.provider)
    runtimes = [provider.runtime(handle.nodes[rank]) for rank in range(len(specs))]
    lost = await asyncio.gather(*(_start(rt, spec) for rt, spec in zip(runtimes, specs, strict=True)))
    for rank, cause in enumerate(lost):
        if cause is not None:
            outcome = _lost(handle, rank, cause)
            await _cancel(runtimes, specs[0].key, skip=rank)
            raise ApplicationError(
                outcome.error or "", outcome.model_dump(), type=ErrorType.NODE_LOST, non_retryable=True
            )


async def _start(runtime: NodeRuntime, spec: JobSpec) -> NodeUnreachableError | TimeoutError | None:
    """Start the job on one node; None once started, else why the node is lost."""
    silent_since = time.monotonic()
    while True:
        try:
            await asyncio.wait_for(runtime.start_job(spec), CALL_TIMEOUT_S)
            return None
        except (NodeUnreachableError, TimeoutError) as exc:
            if is_lost(exc, silent_since):
                return exc
        activity.heartbeat()
        await asyncio.sleep(POLL_MAX_S)


class JobTracker:
    """What the nodes of one job have said so far, and whether that decides the job.

    Both ways of following a job feed it: ``wait_on_nodes`` (setup, one question per node) and
    the cluster's watcher (``activities.job_watch``, one question per node for all its jobs).
    """

    def __init__(self, handle: ClusterHandle, key: str, num_nodes: int, *, started: bool = True) -> None:
        self.handle = handle
        """The cluster as the job sees it: node ``rank`` of the job is ``handle.nodes[rank]``."""
        self.key = key
        self.started = started
        """False while the job may not have reached every node yet (no record there is no loss)."""
        self.states: list[NodeJobState | None] = [None] * num_nodes
        self._answered = [time.monotonic()] * num_nodes
        self._silent: set[int] = set()
        """Ranks whose last question got no answer, and which are not lost yet."""

    def asking(self) -> list[int]:
        """The job's ranks whose node has not decided yet."""
        return [rank for rank, state in enumerate(self.states) if state is None or not state.done]

    def hear(
        self, rank: int, answer: NodeJobState | BaseException | None, *, folder_gone: bool = False
    ) -> JobOutcome | None:
        """Take node ``rank``'s answer (or why it gave none); the outcome if that decides the job.

        ``folder_gone``: the node answered without its runtime folder, which every node has from
        its preparation until it is removed; so no start will reach it, and a missing record is a
        loss even for a job still being started (a watcher armed then may first ask the node after
        it went away, and the start it waited for has already returned).
        An unexpected error is raised: the caller's activity fails and is retried.
        """
        if isinstance(answer, NodeUnreachableError | TimeoutError):
            if is_lost(answer, self._answered[rank]):
                return _lost(self.handle, rank, answer)
            self._silent.add(rank)
            return None
        if isinstance(answer, BaseException):
            raise answer
        self._answered[rank] = time.monotonic()
        self._silent.discard(rank)
        if answer is None:
            if not self.started and self.states[rank] is None and not folder_gone:
                return None
            # The job was started there, so its record is gone: the node lost it (removed, or its
            # disk wiped). Waiting would never end.
            return JobOutcome(
                status=NodeJobStatus.FAILED,
                failed_rank=rank,
                error=f"the job's record vanished from node {rank}",
            )
        self.states[rank] = answer
        return None

    def outcome(self) -> JobOutcome | None:
        """The job's outcome once every node's answer so far decides it.

        A job cancelled on one node while another is silent is not decided until that one answers
        or is lost. The workflow's own cancels do not wait for this outcome, so a cancel seen here
        came from outside the workflow: a node's removal, or the stop of the job's other nodes
        once another node failed (``stop_rest``). A watcher whose attempt timed out after such a
        stop (its result lost) is retried, and the retry must find the lost node, not report the
        stop's CANCELLED. The wait is at most ``NODE_LOST_AFTER_S``.
        """
        outcome = combine_node_states(self.states)
        if outcome is not None and outcome.status == NodeJobStatus.CANCELLED and self._silent:
            return None
        return outcome

    async def stop_rest(self, outcome: JobOutcome) -> None:
        """A job that did not succeed is stopped on its other nodes (a lost one is not asked)."""
        if outcome.status != NodeJobStatus.SUCCEEDED:
            provider = get_provider(self.handle.offering.provider)
            await _cancel(
                [provider.runtime(node) for node in self.handle.nodes], self.key, skip=outcome.lost_rank
            )


async def wait_on_nodes(
    handle: ClusterHandle, key: str, num_nodes: int, *, logs: str | None = None
) -> JobOutcome:
    """Wait until job ``key`` on the first ``num_nodes`` nodes is decided.

    ``logs``: the store stream (``storage.logs``) each poll ships the job's new output to, ended
    with the job; while it has output, the nodes are asked at least every ``LOG_POLL_S``.

    Heartbeats while it waits; every question to a node is bounded by ``CALL_TIMEOUT_S``. If any
    node fails, the others are stopped. A node that has not answered for ``NODE_LOST_AFTER_S``
    (its host is down, or its link) fails the job with ``lost_rank`` set and a message naming it.
    If the workflow asked for the activity's cancellation, the job is stopped on every node
    before the cancellation propagates (``stop_if_cancelled``).
    """
    provider = get_provider(handle.offering.provider)
    runtimes = [provider.runtime(handle.nodes[rank]) for rank in range(num_nodes)]
    tracker = JobTracker(handle.model_copy(update={"nodes": handle.nodes[:num_nodes]}), key, num_nodes)
    shipper = None
    if logs is not None:
        from skyhop.activities.log_ship import LogShipper
        from skyhop.storage.logs import log_store

        shipper = LogShipper(log_store(), logs, key, runtimes, beat=activity.heartbeat)
    pace = PollPace()
    try:
        while True:
            asking = tracker.asking()
            answers = await asyncio.gather(
                *(asyncio.wait_for(runtimes[rank].job_state(key), CALL_TIMEOUT_S) for rank in asking),
                return_exceptions=True,
            )
            outcome = None
            for rank, answer in zip(asking, answers, strict=True):
                outcome = tracker.hear(rank, answer)
                if outcome is not None:
                    break
            outcome = outcome or tracker.outcome()
            if outcome is not None:
                if shipper is not None:
                    await shipper.finish()
                await tracker.stop_rest(outcome)
                return outcome
            shipped = await shipper.ship() if shipper is not None else 0
            activity.heartbeat([state.status if state else "UNKNOWN" for state in tracker.states])
            await asyncio.sleep(pace.next(shipped))
    except asyncio.CancelledError:
        await stop_if_cancelled(handle, key, num_nodes)
        raise


async def _cancel(runtimes: list[NodeRuntime], key: str, skip: int | None = None) -> None:
    """Stop the job on every node but ``skip``; a node that does not answer in time is left as it is."""
    await asyncio.gather(
        *(
            asyncio.wait_for(rt.cancel_job(key), CANCEL_TIMEOUT_S)
            for rank, rt in enumerate(runtimes)
            if rank != skip
        ),
        return_exceptions=True,
    )


def is_lost(cause: NodeUnreachableError | TimeoutError, silent_since: float) -> bool:
    """Whether a node that gave no answer (``cause``) is lost: gone for good, or silent too long."""
    return isinstance(cause, NodeGoneError) or time.monotonic() - silent_since >= NODE_LOST_AFTER_S


def _lost(handle: ClusterHandle, rank: int, cause: NodeUnreachableError | TimeoutError) -> JobOutcome:
    node = handle.nodes[rank]
    if isinstance(cause, NodeGoneError):
        how = f"is gone: {cause}"
    elif isinstance(cause, NodeUnreachableError):
        how = f"stopped answering for {NODE_LOST_AFTER_S:g}s: {cause}"
    else:
        how = f"stopped answering for {NODE_LOST_AFTER_S:g}s: no answer within {CALL_TIMEOUT_S:g}s"
    return JobOutcome(
        status=NodeJobStatus.FAILED, failed_rank=rank, lost_rank=rank, error=f"node {rank} ({node.ip}) {how}"
    )


def node_lost(handle: ClusterHandle, rank: int, cause: NodeUnreachableError) -> ApplicationError:
    """The non-retryable error of work that cannot go on: node ``rank`` stopped answering or is gone."""
    outcome = _lost(handle, rank, cause)
    return ApplicationError(
        outcome.error or "", outcome.model_dump(), type=ErrorType.NODE_LOST, non_retryable=True
    )
