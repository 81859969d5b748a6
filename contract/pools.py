"""The pool contract: ``PoolWorkflow``'s input, update, signals, query and state.

A pool (``skyhop jobs pool apply -p NAME pool.yaml``) is one ``PoolWorkflow`` (id ``pool:<name>``)
keeping ``workers`` clusters (``<name>-worker-<id>``) up with the pool task's setup done. Managed jobs
launched with ``--pool NAME`` ask it for a worker (signal ``acquire``), are told which one
(signal ``worker_assigned`` to the job's workflow), run their ``run`` on it through the cluster's
job queue, and give it back (signal ``release``). Fields are only added.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, Field

from skyhop.providers.base import ClusterHandle
from skyhop.spec import Task
from skyhop.spec.limits import MAX_POOL_WORKERS

__all__ = [
    "POOL_NAME_PATTERN",
    "PoolApply",
    "PoolClaim",
    "PoolQuery",
    "PoolRelease",
    "PoolRequest",
    "PoolSignal",
    "PoolState",
    "PoolStatus",
    "PoolUpdate",
    "PoolWorker",
    "WorkerAssigned",
    "WorkerStatus",
    "pool_workflow_id",
    "worker_cluster_name",
]

POOL_NAME_PATTERN = r"^[a-z]([-a-z0-9]{0,40}[a-z0-9])?$"
"""A pool name: a cluster name short enough to leave room for ``-worker-<id>``."""


def pool_workflow_id(name: str) -> str:
    return f"pool:{name}"


def worker_cluster_name(pool: str, worker_id: int) -> str:
    return f"{pool}-worker-{worker_id}"


class PoolUpdate(StrEnum):
    APPLY = "apply"
    """``PoolApply`` -> ``PoolState``: the pool's task and worker count from now on."""


class PoolSignal(StrEnum):
    ACQUIRE = "acquire"
    """``PoolClaim``, to the pool: a job waits for an idle worker (first come, first served)."""
    RELEASE = "release"
    """``PoolRelease``, to the pool: a job is done with its worker, or stops waiting for one."""
    WORKER_ASSIGNED = "worker_assigned"
    """``WorkerAssigned``, from the pool to the job's workflow: the worker it may use."""


class PoolQuery(StrEnum):
    STATE = "state"
    """-> ``PoolState``."""


class PoolStatus(StrEnum):
    READY = "READY"
    """Every wanted worker is up (or there are none to want)."""
    PROVISIONING = "PROVISIONING"
    """Some wanted workers are still being brought up or replaced."""
    SHUTTING_DOWN = "SHUTTING_DOWN"
    """``pool down``: jobs cancelled, workers being torn down."""
    DOWN = "DOWN"


class WorkerStatus(StrEnum):
    PROVISIONING = "PROVISIONING"
    """Its cluster is being brought up and set up (a ``LaunchWorkflow``)."""
    IDLE = "IDLE"
    BUSY = "BUSY"
    """A job holds it."""
    SHUTTING_DOWN = "SHUTTING_DOWN"
    """Being torn down: not wanted any more, or lost (then replaced)."""
    FAILED = "FAILED"
    """Could not be brought up; a new worker is tried in its place."""


class PoolWorker(BaseModel):
    worker_id: int
    cluster_name: str
    version: int
    """The ``PoolState.version`` whose task it was set up with."""
    status: WorkerStatus = WorkerStatus.PROVISIONING
    handle: ClusterHandle | None = None
    job_workflow: str | None = None
    """The workflow id of the managed job using it."""
    job_id: int | None = None
    message: str | None = None
    """Why it failed, or was replaced."""


class PoolClaim(BaseModel):
    job_workflow: str
    job_id: int


class PoolRelease(BaseModel):
    job_workflow: str
    worker_id: int | None = None
    """The worker it gives back; None: it had none yet (it was cancelled while it waited)."""
    lost: str | None = None
    """Set when the worker's nodes were lost under the job: the worker is replaced."""


class WorkerAssigned(BaseModel):
    worker_id: int
    cluster_name: str
    handle: ClusterHandle


class PoolApply(BaseModel):
    task: Task
    """The workers' resources and setup (the pool file, its ``pool:`` section included)."""
    workers: int = Field(ge=0, le=MAX_POOL_WORKERS)


class PoolRequest(BaseModel):
    """``PoolWorkflow``'s input; ``state`` is carried across continue-as-new."""

    name: str = Field(pattern=POOL_NAME_PATTERN)
    user: str = "unknown"
    check_seconds: float = Field(default=60.0, gt=0)
    """How often each worker's nodes are checked with the provider (a lost one is replaced)."""
    history_limit: int | None = None
    state: PoolState | None = None


class PoolState(BaseModel):
    name: str
    status: PoolStatus = PoolStatus.PROVISIONING
    task: Task | None = None
    """The current version's task (None until the first ``apply``)."""
    version: int = 0
    workers_wanted: int = 0
    workers: list[PoolWorker] = []
    waiting: list[PoolClaim] = []
    """Jobs waiting for a worker, first first."""
    next_worker_id: int = 1
    failures: int = 0
    """Workers in a row that could not be brought up (each makes the next wait longer)."""
