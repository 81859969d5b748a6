"""Controller-side view of node jobs: what to start, what a node reports, and the whole job's outcome."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict

__all__ = [
    "ContainerSpec",
    "ContainerStage",
    "JobOutcome",
    "JobSpec",
    "JobsQuery",
    "JobsReport",
    "NodeJobState",
    "NodeJobStatus",
    "combine_node_states",
]


class NodeJobStatus(StrEnum):
    """A job's status on one node, as the node runner writes it (``node_runner``'s constants)."""

    STARTING = "STARTING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"

    @property
    def done(self) -> bool:
        return self in (NodeJobStatus.SUCCEEDED, NodeJobStatus.FAILED, NodeJobStatus.CANCELLED)


class ContainerStage(StrEnum):
    """Which container a job runs in (``node_runner``'s constants)."""

    SETUP = "setup"
    """The task's image; once the job succeeds, the container is kept as the node's image."""
    RUN = "run"
    """The node's image (the set-up container), or the task's image on a node that has none."""


class ContainerSpec(BaseModel):
    """A job that runs in a container on its node (``image_id: docker:IMAGE``), as SkyPilot runs it.

    The node runner starts it with docker or podman, whichever the node has, on the host's network,
    with the job's home, working folder and ``binds`` bind-mounted at the same paths and the job's
    envs passed, so the workdir and file mounts are where the job expects them.
    """

    model_config = ConfigDict(frozen=True)

    image: str
    stage: ContainerStage
    binds: list[str] = []
    """Absolute paths outside the home to bind-mount too (absolute file-mount targets)."""
    gpus: bool = False
    """Pass the node's GPUs through (docker ``--gpus all``, podman's CDI ``nvidia.com/gpu=all``)."""
    run_options: list[str] = []
    """The task's ``config.docker.run_options`` as arguments, added after skyhop's own."""


class JobSpec(BaseModel):
    """One process tree to run on one node, identified by ``key`` (unique per node)."""

    model_config = ConfigDict(frozen=True)

    key: str
    script: str
    env: dict[str, str] = {}
    cwd: str | None = None
    """Working folder; relative paths are inside the node's runtime folder."""
    container: ContainerSpec | None = None
    """Run ``script`` in this container instead of on the node's own OS."""


class NodeJobState(BaseModel):
    """What the node runner reports for one job (``node_runner.read_state``)."""

    status: NodeJobStatus
    exit_code: int | None = None
    started_at: float | None = None
    ended_at: float | None = None
    error: str | None = None

    @property
    def done(self) -> bool:
        """Whether the job has ended on this node."""
        return self.status.done


class JobsQuery(BaseModel):
    """What a watcher asks one node (``node_runner.watch``): these jobs' states, and what is newer."""

    keys: list[str]
    prefix: str
    """Jobs are ``<prefix><n>``; ``newer`` lists those with ``n > newer_than`` not among ``keys``."""
    newer_than: int | None
    """None: the watcher follows only ``keys``, and nothing newer is looked for."""
    known: list[str] = []
    """Newer jobs not to list (seen already, and not to be followed)."""


class JobsReport(BaseModel):
    """A node's answer to a ``JobsQuery``."""

    states: dict[str, NodeJobState | None]
    """Each asked job's state, None where it was never started (or its record vanished)."""
    newer: list[str] = []
    present: bool = True
    """False when the node's runtime folder is gone (the node was removed, or its disk wiped)."""


class JobOutcome(BaseModel):
    """How a job ended across all its nodes."""

    status: NodeJobStatus
    """SUCCEEDED, FAILED or CANCELLED."""
    exit_code: int | None = None
    failed_rank: int | None = None
    error: str | None = None
    lost_rank: int | None = None
    """Set when the job failed because node ``lost_rank`` stopped answering (the cluster is degraded)."""


def combine_node_states(states: list[NodeJobState | None]) -> JobOutcome | None:
    """The job's outcome once it is decided, else None.

    A job fails as soon as any node fails (its exit code is that node's), and succeeds when every
    node has succeeded.
    """
    for rank, state in enumerate(states):
        if state is not None and state.status in (NodeJobStatus.FAILED, NodeJobStatus.CANCELLED):
            return JobOutcome(
                status=state.status, exit_code=state.exit_code, failed_rank=rank, error=state.error
            )
    if all(state is not None and state.status == NodeJobStatus.SUCCEEDED for state in states):
        return JobOutcome(status=NodeJobStatus.SUCCEEDED, exit_code=0)
    return None
