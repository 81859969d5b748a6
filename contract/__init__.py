"""The public contract of skyhop's workflows: names, task queues and JSON payload models.

Any Temporal client, in any language, can drive skyhop with these: start ``LaunchWorkflow`` on
``skyhop-workflows`` with a ``LaunchRequest`` as JSON, query ``ClusterWorkflow`` (id
``cluster:<name>``) for its ``ClusterRecord``. Fields are only ever added, never renamed.

This module holds the names (workflow types, queues, signals, updates, queries, search
attributes, statuses, error types) and imports only the standard library; the payload models are
in its modules (``clusters``, ``managed_jobs``, ``job_index``, ``pools``, ``serve``, ...), so a
command that needs a few names does not load them all.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "ClusterQuery",
    "ClusterUpdate",
    "LaunchQuery",
    "SearchAttribute",
    "TaskQueue",
    "WorkflowKind",
    "WorkflowType",
    "ErrorType",
    "LaunchStage",
    "CLUSTER_WORKFLOW",
    "QUERY_OUTSIDE_TASK",
    "CLUSTER_NAME_PATTERN",
    "LAUNCH_WORKFLOW",
    "LOCK_LEASE_WORKFLOW",
    "LONG_QUEUE",
    "SEARCH_ATTRIBUTES",
    "SHORT_QUEUE",
    "WORKFLOW_QUEUE",
    "HolderKind",
    "LockSignal",
    "Operation",
    "ClusterStatus",
    "JOB_ENDED_SIGNAL",
    "JOB_KEY_PREFIX",
    "JobStatus",
    "cluster_workflow_id",
    "host_queue",
    "setup_key",
]


class TaskQueue(StrEnum):
    """skyhop's task queues: long and short work never share pollers or slots."""

    WORKFLOWS = "skyhop-workflows"
    """Workflow tasks of every skyhop workflow."""
    LONG = "skyhop-long"
    """Activities that take minutes to hours and heartbeat: provision, sync, setup, run, teardown."""
    SHORT = "skyhop-short"
    """Activities that take milliseconds: optimize, cluster bookkeeping, probes."""


WORKFLOW_QUEUE = TaskQueue.WORKFLOWS
LONG_QUEUE = TaskQueue.LONG
SHORT_QUEUE = TaskQueue.SHORT


def host_queue(queue: str, host: str) -> str:
    """``queue``'s twin that only the workers of machine ``host`` poll (``skyhop-long@<host>``):
    activities of a cluster bound to one machine (``local``) run there."""
    return f"{queue}@{host}"


class WorkflowType(StrEnum):
    """The workflow types a client starts or finds."""

    LAUNCH = "LaunchWorkflow"
    CLUSTER = "ClusterWorkflow"
    LOCK_LEASE = "LockLeaseWorkflow"
    MANAGED_JOB = "ManagedJobWorkflow"
    MANAGED_JOB_IDS = "ManagedJobIdsWorkflow"
    JOB_INDEX = "JobIndexWorkflow"
    WATCH_HUB = "WatchHubWorkflow"
    SERVICE = "ServiceWorkflow"
    SSH_POOLS = "SSHPoolsWorkflow"
    POOL = "PoolWorkflow"


LAUNCH_WORKFLOW = WorkflowType.LAUNCH
CLUSTER_WORKFLOW = WorkflowType.CLUSTER
LOCK_LEASE_WORKFLOW = WorkflowType.LOCK_LEASE


class ClusterUpdate(StrEnum):
    """The updates ``ClusterWorkflow`` takes (what each takes and returns: the README's contract)."""

    SUBMIT_JOB = "submit_job"
    CANCEL = "cancel"
    STOP = "stop"
    START = "start"
    DOWN = "down"
    SET_AUTOSTOP = "set_autostop"
    REFRESH = "refresh"


class ClusterQuery(StrEnum):
    STATUS = "status"
    """The ``ClusterRecord``."""


class LaunchQuery(StrEnum):
    PROGRESS = "progress"
    """The ``LaunchProgress``."""


JOB_ENDED_SIGNAL = "job_ended"
"""Signal the cluster sends a job's ``JobSubmission.notify`` workflow when the job ends (``JobEnded``)."""
JOB_KEY_PREFIX = "job-"
"""A queued job's key on its nodes is this and its id (``JobRecord.key``); setups have other keys."""


QUERY_OUTSIDE_TASK = "activation outside a workflow task (a query brought new events); evicting to replay"
"""Why the worker failed a query (``workflows.runner``): asking again gets an answer."""


class SearchAttribute(StrEnum):
    """Custom search attributes skyhop's workflows set, all keywords (the worker registers them)."""

    KIND = "SkyhopKind"
    """A ``WorkflowKind``."""
    CLUSTER = "SkyhopCluster"
    STATUS = "SkyhopStatus"
    """A cluster's ``ClusterStatus``; a managed job's ``ManagedJobStatus`` (never CANCELLING: it
    stays as it was until the job's end)."""
    NAME = "SkyhopName"
    """A managed job's name (``jobs cancel -n NAME``)."""
    STAGE = "SkyhopStage"
    """A launch's ``LaunchStage``."""
    USER = "SkyhopUser"


SEARCH_ATTRIBUTES = {attribute.value: "Keyword" for attribute in SearchAttribute}
"""Name -> indexed value type, as the operator service registers them."""


class WorkflowKind(StrEnum):
    """What ``SkyhopKind`` says a workflow is, for listings (``SkyhopKind = 'cluster'``)."""

    CLUSTER = "cluster"
    LAUNCH = "launch"
    MANAGED_JOB = "managed-job"
    SERVICE = "service"
    POOL = "pool"


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


class LockSignal(StrEnum):
    """Names of the signals of the launch <-> cluster lock."""

    CLAIM = "claim"
    """Launch -> cluster (``ClaimRequest``): queue me for the lock; sent with the cluster's start."""
    CLAIM_GRANTED = "claim_granted"
    """Cluster -> launch (``ClaimGrant``): the lock is yours (or the cluster is gone)."""
    RELEASE = "release"
    """Launch -> cluster (``Release``): the lock back, or my place in the queue given up."""


class HolderKind(StrEnum):
    """Who may hold a cluster's lock: a launch workflow, or one of the cluster's own operations."""

    LAUNCH = "launch"
    OPERATION = "operation"


class Operation(StrEnum):
    """The cluster's own operations that hold its lock while they run."""

    STOP = "stop"
    START = "start"
    DOWN = "down"
    AUTOSTOP = "autostop"

    @property
    def past(self) -> str:
        """How a refusal names it: "cluster dev is being stopped"."""
        return {"stop": "stopped", "start": "started", "down": "taken down", "autostop": "autostopped"}[self]


class ClusterStatus(StrEnum):
    """SkyPilot's cluster statuses, plus TERMINATED for a cluster that is gone."""

    INIT = "INIT"
    UP = "UP"
    STOPPED = "STOPPED"
    TERMINATED = "TERMINATED"


class LaunchStage(StrEnum):
    """Where a launch is: its ``progress`` query's ``stage`` and its ``SkyhopStage`` search attribute."""

    LOCK = "lock"
    """Waiting for the cluster's lock (another launch or a stop/start/down holds it)."""
    OPTIMIZE = "optimize"
    PROVISION = "provision"
    SYNC_WORKDIR = "sync_workdir"
    SYNC_FILE_MOUNTS = "sync_file_mounts"
    SETUP = "setup"
    EXEC = "exec"
    DONE = "done"
    FAILED = "failed"

    @property
    def ended(self) -> bool:
        """Whether the launch has ended, either way."""
        return self in (LaunchStage.DONE, LaunchStage.FAILED)


class ErrorType(StrEnum):
    """The ``type`` of every ``ApplicationError`` skyhop raises, as clients and retry policies see it."""

    NO_FEASIBLE_OFFERING = "NoFeasibleOffering"
    CATALOG_ERROR = "CatalogError"
    SETUP_FAILED = "SetupFailed"
    SUBMIT_REJECTED = "SubmitRejected"
    RESOURCES_MISMATCH = "ResourcesMismatch"
    OUTSIDE_NODE = "OutsideNodeError"
    CLUSTER_GONE = "ClusterGone"
    CLUSTER_STATE = "ClusterStateError"
    PROVISION_FAILED = "ProvisionFailed"
    RESOURCES_UNAVAILABLE = "ResourcesUnavailable"
    CLEANUP_FAILED = "CleanupFailed"
    NODE_LOST = "NodeLost"
    UNAUTHENTICATED_PAYLOAD = "UnauthenticatedPayload"
    PROVIDER_UNAVAILABLE = "ProviderUnavailableError"
    CREDENTIALS = "CredentialsError"
    NOT_SUPPORTED = "NotSupportedError"
    SDK_MISSING = "SdkMissingError"
    INVALID_REQUEST = "InvalidRequestError"
    GIT_WORKDIR_FAILED = "GitWorkdirFailed"
    """``workdir: {url, ref}`` could not be cloned or checked out (a wrong URL or ref)."""
    STORAGE_FAILED = "StorageFailed"
    """A bucket is missing, taken or refused, or a node could not copy or mount it."""

    @property
    def retry_can_fix(self) -> bool:
        """False for errors that are the user's to fix: an activity raising one is not retried."""
        return self not in _USER_TO_FIX

    @classmethod
    def user_errors(cls) -> list[str]:
        """The activity retry policies' non-retryable types."""
        return [error.value for error in cls if not error.retry_can_fix]


_USER_TO_FIX = frozenset(
    {
        ErrorType.NO_FEASIBLE_OFFERING,
        ErrorType.SETUP_FAILED,
        ErrorType.SUBMIT_REJECTED,
        ErrorType.RESOURCES_MISMATCH,
        ErrorType.OUTSIDE_NODE,
        ErrorType.GIT_WORKDIR_FAILED,
        # A provider's errors that retrying cannot fix (``providers.errors.RETRY_CANNOT_FIX``).
        ErrorType.PROVIDER_UNAVAILABLE,
        ErrorType.CREDENTIALS,
        ErrorType.NOT_SUPPORTED,
        ErrorType.SDK_MISSING,
        ErrorType.INVALID_REQUEST,
        ErrorType.STORAGE_FAILED,
    }
)


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
