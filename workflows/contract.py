"""The public contract of skyhop's workflows: names, task queues and JSON payload models.

Any Temporal client, in any language, can drive skyhop with these: start ``LaunchWorkflow`` on
``skyhop-workflows`` with a ``LaunchRequest`` as JSON, query ``ClusterWorkflow`` (id
``cluster:<name>``) for its ``ClusterRecord``. Fields are only ever added, never renamed.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, Field

from providers.base import ClusterHandle, Offering
from spec import Resources, Task
from workflows.scheduler import Demand, NodeAllocation

__all__ = [
    "CLUSTER_WORKFLOW",
    "QUERY_OUTSIDE_TASK",
    "AutostopRequest",
    "CancelRequest",
    "CancelResult",
    "CLUSTER_NAME_PATTERN",
    "LAUNCH_WORKFLOW",
    "LONG_QUEUE",
    "SEARCH_ATTRIBUTES",
    "SHORT_QUEUE",
    "WORKFLOW_QUEUE",
    "ClaimGrant",
    "ClaimRequest",
    "ClusterInput",
    "ClusterRecord",
    "ClusterStatus",
    "FailoverAttempt",
    "JOB_ENDED_SIGNAL",
    "JOB_KEY_PREFIX",
    "JobEnded",
    "JobRecord",
    "JobStatus",
    "JobSubmission",
    "LaunchProgress",
    "LaunchRequest",
    "LaunchResult",
    "Release",
    "StartRequest",
    "cluster_workflow_id",
    "setup_key",
]

WORKFLOW_QUEUE = "skyhop-workflows"
"""Workflow tasks of every skyhop workflow."""
LONG_QUEUE = "skyhop-long"
"""Activities that take minutes to hours and heartbeat: provision, sync, setup, run, teardown."""
SHORT_QUEUE = "skyhop-short"
"""Activities that take milliseconds: optimize, cluster bookkeeping, probes."""

LAUNCH_WORKFLOW = "LaunchWorkflow"
CLUSTER_WORKFLOW = "ClusterWorkflow"
JOB_ENDED_SIGNAL = "job_ended"
"""Signal the cluster sends a job's ``JobSubmission.notify`` workflow when the job ends (``JobEnded``)."""
JOB_KEY_PREFIX = "job-"
"""A queued job's key on its nodes is this and its id (``JobRecord.key``); setups have other keys."""
QUERY_OUTSIDE_TASK = "activation outside a workflow task (a query brought new events); evicting to replay"
"""Why the worker failed a query (``workflows.runner``): asking again gets an answer."""

SEARCH_ATTRIBUTES = {
    "SkyhopKind": "Keyword",
    "SkyhopCluster": "Keyword",
    "SkyhopStatus": "Keyword",
    "SkyhopStage": "Keyword",
    "SkyhopUser": "Keyword",
}
"""Custom search attributes skyhop's workflows set (the worker registers them)."""

CLUSTER_NAME_PATTERN = r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$"
"""A cluster name: lowercase letters, digits and '-', starting with a letter, at most 63 characters.
pydantic's engine (Rust's regex) reads ``$`` as the end of the text; Python code must match it
with ``re.fullmatch``, since ``re.match`` lets ``$`` accept a trailing newline (``'abc\\n'``)."""


def cluster_workflow_id(cluster_name: str) -> str:
    """The id of a cluster's entity workflow."""
    return f"cluster:{cluster_name}"


def setup_key(launch_id: str) -> str:
    """The node job key of a launch's setup: its log's name, and what a retried setup re-attaches to."""
    return "setup-" + "".join(c if c.isalnum() or c in "-_" else "_" for c in launch_id)


class ClusterStatus(StrEnum):
    """SkyPilot's cluster statuses, plus TERMINATED for a cluster that is gone."""

    INIT = "INIT"
    UP = "UP"
    STOPPED = "STOPPED"
    TERMINATED = "TERMINATED"


class JobStatus(StrEnum):
    """Status of a job in a cluster's queue."""

    PENDING = "PENDING"
    SETTING_UP = "SETTING_UP"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    FAILED_SETUP = "FAILED_SETUP"
    CANCELLED = "CANCELLED"

    @property
    def done(self) -> bool:
        """Whether the job has ended."""
        return self in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.FAILED_SETUP, JobStatus.CANCELLED)


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

    stage: str
    """optimize, provision, sync_workdir, sync_file_mounts, setup, exec, done or failed."""
    stage_started_at: float
    finished_stages: list[tuple[str, float]] = []
    """(stage, seconds) for each stage that has ended."""
    chosen: Offering | None = None
    handle: ClusterHandle | None = None
    """The cluster, once provisioned or found UP (setup's log is read from its nodes)."""
    job_id: int | None = None
    reused: bool = False
    error: str | None = None
    attempts: list[FailoverAttempt] = []
    """Failed provision attempts so far, oldest first."""
    retry_at: float | None = None
    """With ``retry_until_up``: when the next search starts, while the launch waits for it."""


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
    holder: str | None = None
    """Workflow id of the launch that holds the cluster's lock, if any."""
    waiting: list[str] = []
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


class ClusterInput(BaseModel):
    """Input of ``ClusterWorkflow``: a new cluster, or the state carried over a continue-as-new."""

    record: ClusterRecord
    submissions: dict[int, JobSubmission] = {}
    """Submissions of the jobs that have not ended, by job id (re-dispatched after a continue-as-new)."""
    setup_task: Task | None = None
    """The last launch's task: what a start re-runs on nodes that a stop could not keep."""
    history_limit: int | None = None
    """Continue as new once the history has this many events (default: when Temporal suggests it)."""


class ClaimRequest(BaseModel):
    """Signal ``claim``: a launch asks for the cluster's lock."""

    launch_id: str


class ClaimGrant(BaseModel):
    """Signal ``claim_granted`` sent back to the launch that holds the lock."""

    record: ClusterRecord
    closed: bool = False
    """True when the cluster was taken down while the launch waited."""


class Release(BaseModel):
    """Signal ``release``: the holder gives the lock back, with what it changed."""

    launch_id: str
    handle: ClusterHandle | None = None
    """The provisioned cluster, when the launch provisioned it."""
    resources: Resources | None = None
    num_nodes: int | None = None
    user: str | None = None
    idle_minutes: int | None = None
    autostop_down: bool = False
    failed: bool = False
    task: Task | None = None
    """The launch's task (its setup is re-run if the cluster is started again on new nodes)."""


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
