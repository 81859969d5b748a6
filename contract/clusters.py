"""The JSON payloads of launches and clusters: ``LaunchWorkflow``'s request, progress and result,
``ClusterWorkflow``'s record, jobs and inputs, and the messages of a cluster's lock.

Apart from the names in ``skyhop.contract`` (which import only the standard library, so that a
command that never builds a task, like ``jobs queue``, does not load the task model), because
these models hold tasks and cluster handles: importing them loads ``skyhop.spec`` and
``skyhop.providers.base``. Fields are only ever added, never renamed.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from skyhop.contract import (
    CLUSTER_NAME_PATTERN,
    JOB_KEY_PREFIX,
    ClusterStatus,
    HolderKind,
    JobStatus,
    LaunchStage,
    Operation,
)
from skyhop.providers.base import ClusterHandle, DiskTier, NetworkTier, Offering, ProvisionRequest
from skyhop.spec import Resources, Task
from skyhop.spec.packed import ContentRef, PackedFiles
from skyhop.spec.storage import BucketRef

__all__ = [
    "AutostopRequest",
    "CancelRequest",
    "CancelResult",
    "ClaimGrant",
    "ClaimRequest",
    "ClusterInput",
    "ClusterRecord",
    "ClusterStorage",
    "ContentRef",
    "DEFAULT_CPU_DEMAND",
    "Demand",
    "DiskTier",
    "FailoverAttempt",
    "JobEnded",
    "JobRecord",
    "JobSubmission",
    "LaunchProgress",
    "LaunchRequest",
    "LaunchResult",
    "LaunchResume",
    "LockHolder",
    "LockLease",
    "NetworkTier",
    "NodeAllocation",
    "PackedFiles",
    "ProvisionState",
    "Release",
    "StartRequest",
]


class LockHolder(BaseModel):
    """Who holds (or waits for) a cluster's lock: a launch by workflow id, or an operation by name."""

    model_config = ConfigDict(frozen=True)

    kind: HolderKind
    id: str
    """The launch's workflow id (any run of it), or the ``Operation``'s value."""

    @classmethod
    def launch(cls, workflow_id: str) -> LockHolder:
        return cls(kind=HolderKind.LAUNCH, id=workflow_id)

    @classmethod
    def operation(cls, operation: Operation) -> LockHolder:
        return cls(kind=HolderKind.OPERATION, id=operation.value)

    @model_validator(mode="before")
    @classmethod
    def _from_legacy_string(cls, data: Any) -> Any:
        """Records carried over a continue-as-new by older code named the holder by a bare string."""
        if isinstance(data, str):
            kind = HolderKind.OPERATION if data in {op.value for op in Operation} else HolderKind.LAUNCH
            return {"kind": kind, "id": data}
        return data


class LaunchRequest(BaseModel):
    """Input of ``LaunchWorkflow``: run ``task`` on cluster ``cluster_name``, creating it if needed."""

    cluster_name: str = Field(pattern=CLUSTER_NAME_PATTERN)
    task: Task
    user: str = "unknown"
    idle_minutes: int | None = Field(default=None, ge=0)
    """Autostop after this many idle minutes (kept on the cluster record)."""
    down: bool = False
    """With ``idle_minutes``: tear the cluster down instead of stopping it."""
    retry_until_up: bool = False
    """When every candidate failed, wait (exponential backoff) and search again, until one is up."""
    minimize: Literal["cost", "time"] = "cost"
    """What the optimizer minimises: $ (price x estimated hours) or estimated hours."""
    history_limit: int | None = None
    """Continue as new between searches once the history has this many events (default: when
    Temporal suggests it)."""
    resume: LaunchResume | None = None
    """Set only by the launch itself when it continues as new: where the previous run stood."""


class FailoverAttempt(BaseModel):
    """One failed provision attempt: where, and why (SkyPilot's failover history)."""

    provider: str
    region: str | None = None
    zone: str | None = None
    instance_type: str
    kind: str
    """capacity, quota, credentials, not supported, invalid request, or cancelled."""
    code: str
    """The cloud's error code, e.g. InsufficientInstanceCapacity."""
    message: str
    blocked: str
    """What failover ruled out because of it: zone, region, provider, or nothing (fatal)."""
    next_location: str | None = None
    """Where the launch tried next, once decided."""

    @property
    def location(self) -> str:
        """``provider region/zone`` as the CLI prints it."""
        return " ".join(p for p in (self.provider, self.zone or self.region) if p)


class ProvisionState(BaseModel):
    """Where provisioning stands: what its workflow shows, and carries over a continue-as-new."""

    attempts: list[FailoverAttempt] = []
    """The most recent failed attempts, oldest first (at most ``workflows.provisioner.KEPT_ATTEMPTS``)."""
    earlier_attempts: int = 0
    """Failed attempts older than ``attempts``, no longer listed, so the state stays bounded."""
    searches: int = 0
    """Searches that ended with every candidate failed (the ``--retry-until-up`` backoff grows with it)."""
    attempts_started: int = 0
    """Attempts begun so far: numbers each attempt's id, unique across continue-as-new runs."""
    chosen: Offering | None = None
    """Where the current (or last) attempt is."""
    retry_at: float | None = None
    """With ``retry_until_up``: when the next search starts, while waiting for it."""


class LaunchResult(BaseModel):
    """Output of ``LaunchWorkflow``."""

    cluster_name: str
    job_id: int | None
    """The submitted job's id on the cluster, or None when the task has no ``run``."""
    provisioned: bool
    """False when an existing UP cluster was reused."""
    handle: ClusterHandle


class LaunchProgress(BaseModel):
    """What ``LaunchWorkflow``'s ``progress`` query returns."""

    stage: LaunchStage
    stage_started_at: float
    finished_stages: list[tuple[LaunchStage, float]] = []
    """(stage, seconds) for each stage that has ended."""
    chosen: Offering | None = None
    handle: ClusterHandle | None = None
    """The cluster, once provisioned or found UP (its nodes are the ranks of setup's log in the store)."""
    job_id: int | None = None
    reused: bool = False
    error: str | None = None
    attempts: list[FailoverAttempt] = []
    """Failed provision attempts so far, oldest first (the most recent ones; see ``earlier_attempts``)."""
    retry_at: float | None = None
    """With ``retry_until_up``: when the next search starts, while the launch waits for it."""
    earlier_attempts: int = 0
    """Failed attempts older than ``attempts``, dropped to keep a long ``--retry-until-up`` bounded."""
    earlier_stages: int = 0
    """Finished stages older than ``finished_stages``, dropped for the same reason."""


DEFAULT_CPU_DEMAND = 0.5
"""vCPUs a job takes on each node when its task names none (SkyPilot's default task demand)."""


class Demand(BaseModel):
    """What a job asks of each of its nodes."""

    model_config = ConfigDict(frozen=True)

    cpus: float = DEFAULT_CPU_DEMAND
    gpus: dict[str, float] = {}
    num_nodes: int = 1


class NodeAllocation(BaseModel):
    """What one rank of a job was given on one node of the cluster."""

    model_config = ConfigDict(frozen=True)

    node: int
    """Rank of the node in the cluster (the job's own rank is its index in the placement)."""
    cpus: float
    gpu_name: str | None = None
    gpu_ids: list[int] = []
    gpu_share: float = 0.0
    """Fraction of each GPU in ``gpu_ids`` taken (1.0 for whole GPUs)."""


class JobRecord(BaseModel):
    """A job in a cluster's queue."""

    job_id: int
    name: str | None = None
    user: str = "unknown"
    request_id: str
    submitted_at: float
    started_at: float | None = None
    ended_at: float | None = None
    status: JobStatus = JobStatus.PENDING
    num_nodes: int = 1
    resources: str = ""
    exit_code: int | None = None
    failed_rank: int | None = None
    error: str | None = None
    task_id: str = ""
    demand: Demand | None = None
    """What the job asks of each of its nodes (vCPUs, GPUs); None on records from before queueing."""
    placement: list[NodeAllocation] = []
    """The nodes (and GPUs) the job was given, in job-rank order; empty while PENDING."""

    @property
    def key(self) -> str:
        """The job's key on its nodes (folder name under ``jobs/``)."""
        return f"{JOB_KEY_PREFIX}{self.job_id}"

    def handle_in(self, cluster: ClusterHandle) -> ClusterHandle:
        """The cluster as the job sees it: the nodes it was placed on, in job-rank order."""
        if not self.placement:
            return cluster.model_copy(update={"nodes": cluster.nodes[: self.num_nodes]})
        return cluster.model_copy(update={"nodes": [cluster.nodes[a.node] for a in self.placement]})


class ClusterRecord(BaseModel):
    """Everything skyhop knows about a cluster; the state of its ``ClusterWorkflow``."""

    name: str
    status: ClusterStatus = ClusterStatus.INIT
    handle: ClusterHandle | None = None
    resources: Resources = Resources()
    num_nodes: int = 1
    launched_at: float | None = None
    user: str = "unknown"
    idle_minutes: int | None = None
    autostop_down: bool = False
    jobs: list[JobRecord] = []
    next_job_id: int = 1
    holder: LockHolder | None = None
    """Who holds the cluster's lock, if anyone."""
    waiting: list[LockHolder] = []
    """Launches waiting for the lock, first come first served."""
    ever_up: bool = False
    idle_since: float | None = None
    """When the cluster last became idle (or autostop was set); None while a job is active."""
    degraded: str | None = None
    """Why the cluster is not fully healthy (a node stopped answering, or vanished), if it is not."""
    refreshed_at: float | None = None
    """When the provider was last asked for the nodes' real state."""
    stop_kept_nodes: bool = True
    """Whether the last stop kept the nodes (a provider that cannot stop removes them; start re-creates)."""
    provision_request: ProvisionRequest | None = None
    """How the nodes were provisioned (offering, market, image, disk, ports): what ``start`` re-creates
    lost nodes with, so they are the same nodes. None on records from before it was kept."""

    @property
    def active_jobs(self) -> list[JobRecord]:
        """Jobs that are PENDING, SETTING_UP or RUNNING."""
        return [job for job in self.jobs if not job.status.done]

    @property
    def autostop_at(self) -> float | None:
        """When autostop fires if the cluster stays idle, or None."""
        if self.idle_minutes is None or self.idle_since is None or self.status != ClusterStatus.UP:
            return None
        return self.idle_since + self.idle_minutes * 60


class LaunchResume(BaseModel):
    """What a launch carries over a continue-as-new between provisioning searches."""

    grant: ClaimGrant
    """The cluster as its lock was granted: the launch goes on holding the lock in its next run."""
    progress: LaunchProgress
    provision: ProvisionState


class ClusterStorage(BaseModel):
    """What the cluster's launches did with buckets, gathered over all of them until ``down``.

    Each launch adds to it (``merged``), failed ones too: a launch may create its buckets and fail
    after. Its size grows with distinct buckets, not with launches.
    """

    buckets: list[BucketRef] = []
    """Named buckets a launch may have created: ``down`` deletes each whose labels say skyhop
    created it for this cluster and it is not persistent (one already gone is skipped, never
    re-created)."""
    mounted: bool = False
    """A launch mounted a bucket (MOUNT or MOUNT_CACHED): ``stop`` and ``down`` unmount first."""
    cached: bool = False
    """A launch mounted one with MOUNT_CACHED: every job, ``exec``'d ones too, flushes the node's
    cached mounts before it is reported done."""

    def merged(self, other: ClusterStorage) -> ClusterStorage:
        buckets = [*self.buckets, *(ref for ref in other.buckets if ref not in self.buckets)]
        return ClusterStorage(
            buckets=buckets, mounted=self.mounted or other.mounted, cached=self.cached or other.cached
        )


class ClusterInput(BaseModel):
    """Input of ``ClusterWorkflow``: a new cluster, or the state carried over a continue-as-new."""

    record: ClusterRecord
    submissions: dict[int, JobSubmission] = {}
    """Submissions of the jobs that have not ended, by job id (re-dispatched after a continue-as-new)."""
    setup_task: Task | None = None
    """The last launch's task: what a start re-runs on nodes that a stop could not keep."""
    history_limit: int | None = None
    """Continue as new once the history has this many events (default: when Temporal suggests it)."""
    storage: ClusterStorage = ClusterStorage()
    """The buckets and mounts of every launch so far. Unset on clusters from before it was kept:
    those know only their last launch's (``setup_task``)."""


class ClaimRequest(BaseModel):
    """Signal ``claim``: a launch asks for the cluster's lock (signal-with-start: see ``open_cluster``)."""

    launch_id: str


class ClaimGrant(BaseModel):
    """Signal ``claim_granted``: the lock is the launch's, with what it needs of the cluster (not the
    whole record and its job list)."""

    status: ClusterStatus = ClusterStatus.INIT
    handle: ClusterHandle | None = None
    """The cluster's nodes, if it has any (a launch provisions only where it has none that are UP)."""
    provision_request: ProvisionRequest | None = None
    """How the cluster's nodes were provisioned (a re-provision brings back the same kind of nodes)."""
    ever_up: bool = False
    """Whether the cluster was ever UP (a re-provision then keeps the nodes it can find)."""
    closed: bool = False
    """True when the cluster was taken down while the launch waited."""

    @model_validator(mode="before")
    @classmethod
    def _from_legacy_record(cls, data: Any) -> Any:
        """Grants in histories recorded by older code carried the whole ``ClusterRecord``."""
        if isinstance(data, dict) and isinstance(data.get("record"), dict):
            record = data["record"]
            keep = ("status", "handle", "provision_request", "ever_up")
            return {**{k: record[k] for k in keep if k in record}, "closed": data.get("closed", False)}
        return data


class Release(BaseModel):
    """Signal ``release``: the holder gives the lock back, with what it changed; a launch still in the
    queue gives up its place with it."""

    launch_id: str
    handle: ClusterHandle | None = None
    """The provisioned cluster, when the launch provisioned it."""
    provision_request: ProvisionRequest | None = None
    """How ``handle`` was provisioned: the cluster keeps it for ``start``."""
    resources: Resources | None = None
    num_nodes: int | None = None
    user: str | None = None
    idle_minutes: int | None = None
    autostop_down: bool = False
    failed: bool = False
    task: Task | None = None
    """The launch's task (its setup is re-run if the cluster is started again on new nodes)."""
    storage: ClusterStorage = ClusterStorage()
    """The launch's buckets and mounts, failed or not: the cluster adds them to its own."""
    abandoned: bool = False
    """Sent by the launch's lease, not the launch: it ended (terminated, timed out) without a release."""


class LockLease(BaseModel):
    """Input of ``LockLeaseWorkflow``: the child a launch starts before it claims ``cluster_name``."""

    cluster_name: str
    launch_id: str


class JobSubmission(BaseModel):
    """Update ``submit_job``: queue ``task``'s run on the cluster (deduplicated by ``request_id``)."""

    request_id: str
    task: Task
    user: str = "unknown"
    sync_workdir: bool = False
    """Sync ``task.workdir`` before the job starts (``exec``; a launch has synced it already)."""
    notify: str | None = None
    """Id of a workflow to signal ``JOB_ENDED`` with a ``JobEnded`` once the job ends (a managed job)."""


class JobEnded(BaseModel):
    """Signal ``JOB_ENDED``: a job submitted with ``notify`` ended, however it ended (sent once)."""

    cluster_name: str
    job: JobRecord
    """The job's record as it ended: status, exit code, failed rank, error."""
    lost_node: int | None = None
    """The cluster node that stopped answering or vanished, when that ended the job."""


class CancelRequest(BaseModel):
    """Update ``cancel``: cancel these jobs (or every active one with ``all``)."""

    job_ids: list[int] = []
    all: bool = False


class CancelResult(BaseModel):
    """What ``cancel`` did."""

    cancelled: list[int] = []
    """Jobs that were active and are now CANCELLED (their processes stopped on every node)."""
    already_done: list[int] = []
    unknown: list[int] = []


class AutostopRequest(BaseModel):
    """Update ``set_autostop``: stop (or down) after ``idle_minutes`` idle; None cancels autostop."""

    idle_minutes: int | None = Field(default=None, ge=0)
    down: bool = False


class StartRequest(BaseModel):
    """Update ``start``: bring a STOPPED cluster back, optionally setting autostop."""

    idle_minutes: int | None = Field(default=None, ge=0)
    down: bool = False


LaunchRequest.model_rebuild()
