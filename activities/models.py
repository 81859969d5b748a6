"""Inputs and outputs of skyhop's activities (one model in, one model out)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from skyhop.contract.clusters import ClaimRequest, JobRecord, JobSubmission
from skyhop.contract.job_index import JobIndexRow
from skyhop.optimizer.blocklist import Blocklist
from skyhop.providers.base import ClusterHandle
from skyhop.providers.runtime.jobs import JobOutcome
from skyhop.spec import Task
from skyhop.spec.packed import ContentRef
from skyhop.spec.storage import BucketRef
from skyhop.spec.task import GitWorkdir
from skyhop.storage.plan import MountPlan

__all__ = [
    "AttachInput",
    "AttemptLog",
    "BucketsInput",
    "CancelClusterJobInput",
    "FileMountsInput",
    "FollowRunInput",
    "FollowSet",
    "FollowedRun",
    "LaunchRunningInput",
    "OpenClusterInput",
    "OptimizeInput",
    "RunJobInput",
    "SetupInput",
    "SubmitJobInput",
    "SyncWorkdirInput",
    "WaitJobInput",
    "WatchHubInput",
    "WatchJobsInput",
    "WatchJobsResult",
    "WatchedJob",
]


class OptimizeInput(BaseModel):
    task: Task
    blocklist: Blocklist = Blocklist()
    """Places failover has ruled out."""
    minimize: Literal["cost", "time"] = "cost"


class SyncWorkdirInput(BaseModel):
    handle: ClusterHandle
    workdir: str = ""
    git: GitWorkdir | None = None
    """The workdir is this repository at its ref instead of the local folder ``workdir``."""
    packed: ContentRef | None = None
    """The workdir as the client packed it into the content store: fetched instead of ``workdir``."""


class FileMountsInput(BaseModel):
    handle: ClusterHandle
    file_mounts: dict[str, str]
    packed: dict[str, ContentRef] = {}
    """Remote path -> the packed file or folder, fetched instead of the local path."""


class BucketsInput(BaseModel):
    """The buckets of a cluster: a task's to create and fill, or all its launches' to delete on ``down``."""

    cluster_name: str
    mounts: list[MountPlan] = []
    """The task's storage entries (``prepare_buckets``)."""
    buckets: list[BucketRef] = []
    """Named buckets of every launch (``delete_buckets``: its labels decide)."""
    packed: dict[str, ContentRef] = {}
    """Local source path -> its tree as the client packed it: uploaded instead of the path."""


class AttachInput(BaseModel):
    """What to copy or mount on every node of ``handle`` (the credentials are the worker's)."""

    handle: ClusterHandle
    mounts: list[MountPlan]


class SetupInput(BaseModel):
    handle: ClusterHandle
    task: Task
    key: str
    """Unique per launch, so a retried setup re-attaches instead of running twice."""


class RunJobInput(BaseModel):
    handle: ClusterHandle
    job: JobRecord
    task: Task
    sync_workdir: bool = False
    flush_cached_mounts: bool = False
    """The cluster has MOUNT_CACHED mounts (``ClusterStorage.cached``): the job's run ends with
    their flush, so what it wrote is in its bucket by the time it is reported done."""


class WaitJobInput(BaseModel):
    """Input of ``wait_job``, which only clusters started before job watchers still call."""

    handle: ClusterHandle
    job: JobRecord


class AttemptLog(BaseModel):
    """One managed-job attempt's stream in the store (``storage.logs.attempt_stream``)."""

    job_id: int
    task_index: int
    attempt: int


class WatchedJob(BaseModel):
    """A started job, as the cluster's watcher follows it (small: the watcher is re-armed often)."""

    job_id: int
    nodes: list[int]
    """The cluster nodes the job runs on, in job-rank order."""
    running: bool
    """False while it is being started: a node without its record yet has not lost it."""
    log: str = ""
    """The store stream its output is shipped to (``storage.logs.job_stream``); "" ships none."""


class FollowedRun(BaseModel):
    """A managed job's running attempt, as a watch hub follows it (``workflows.watch_hub``)."""

    key: str
    """``contract.watch_hub.run_key``: the owner's workflow id, the task and the attempt."""
    owner: str
    """The workflow id of the managed job that waits for the run's end."""
    handle: ClusterHandle
    job: WatchedJob
    log: AttemptLog
    """Where rank 0's output is kept as it runs (its nodes may vanish)."""


class FollowSet(BaseModel):
    """A hub's followed runs, and the version that changes with them."""

    version: int = 0
    runs: list[FollowedRun] = []
    keys: list[str] | None = None
    """Every run followed, when ``runs`` holds only those followed since a version the asker named
    and the hub no longer knows every run forgotten since (``forgotten``)."""
    forgotten: list[str] | None = None
    """The runs forgotten since the version the asker named (then ``runs`` holds only those
    followed since): a hub that follows thousands of runs, some coming and going every second,
    sends what changed, not every key."""


class WatchHubInput(BaseModel):
    follow: FollowSet = FollowSet()
    """What an earlier run followed (continue-as-new carries it)."""
    host: str | None = None
    """The machine whose clusters' runs this hub follows (``Offering.host``): its activity runs
    on that machine's long queue. None: clusters any worker reaches."""
    history_limit: int | None = None
    """Continue as new once the history has this many events (tests force a small one)."""


class FollowRunInput(BaseModel):
    shard: int
    run: FollowedRun

    @property
    def host(self) -> str | None:
        """The machine the run's cluster is bound to, whose hub follows it."""
        return self.run.handle.offering.host


class ManagedRunStart(BaseModel):
    """A managed job's run to start (``activities.jobs.start_managed_run``)."""

    start: RunJobInput
    follow: FollowRunInput
    """Once started, the run's watch hub follows it."""
    report: JobIndexRow | None = None
    """Then the job's row, which says it runs, goes to the job index (None: none was waiting)."""

    @property
    def handle(self) -> ClusterHandle:
        """The run's cluster (``workflows.options.queue_for``)."""
        return self.start.handle


class ClusterLeave(BaseModel):
    """A cluster a managed job leaves to recover, to remove (``activities.jobs.leave_cluster``)."""

    handle: ClusterHandle
    report: JobIndexRow
    """The job's row (RECOVERING), sent as the nodes are removed."""


class ForgetRunInput(BaseModel):
    shard: int
    key: str
    host: str | None
    """The machine the run's cluster is bound to, whose hub follows it."""


class WatchJobsInput(BaseModel):
    handle: ClusterHandle
    jobs: list[WatchedJob]
    newer_than: int | None
    """Return as soon as a node has a job with a higher id: a job the watcher must follow too (None:
    the watcher follows only ``jobs``, as a watch hub does on a managed job's own cluster)."""
    known: list[int] = []
    """Jobs above ``newer_than`` seen already that need no following (ended, or left over)."""
    gone: list[int] = []
    """Cluster nodes a watcher reported gone already: not reported again (the workflow re-armed)."""


class WatchJobsResult(BaseModel):
    ended: dict[int, JobOutcome] = {}
    """Outcome of each job that ended, by job id."""
    gone: list[int] = []
    """Cluster nodes without their runtime folder, or that answered this watcher and fell silent."""
    newer: list[int] = []
    """Ids of jobs above ``newer_than`` (and not ``known``) that a node has and the watcher did not follow."""


class OpenClusterInput(BaseModel):
    cluster_name: str
    user: str
    claim: ClaimRequest | None = None
    """Claim the cluster's lock with the start (signal-with-start)."""


class LaunchRunningInput(BaseModel):
    workflow_id: str
    """A launch that claimed a cluster's lock."""


class CancelClusterJobInput(BaseModel):
    cluster_name: str
    job_id: int


class SubmitJobInput(BaseModel):
    cluster_name: str
    submission: JobSubmission
