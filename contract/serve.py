"""The serving part of the contract: what a service's load balancer takes and reports.

The load balancer (``python -m skyhop.serve.load_balancer``) is a process of its own. On start it
prints one ``LoadBalancerReady`` line (JSON) on stdout, then serves two loopback ports: the service
endpoint, and a control port that answers only requests carrying the bearer token from its token
file (mode 0600) as ``Content-Type: application/json``:

- ``PUT /v1/replicas`` with a ``ReplicaSetUpdate``: the READY replicas, replacing the previous set
  (answers a ``ReplicaSetAccepted``);
- ``GET /v1/stats``: a ``LoadBalancerStats``, the request counts the autoscaler reads.

The controller is ``ServiceWorkflow`` (id ``service:<name>``, input ``ServiceRequest``): query
``state`` (``ServiceState``: the endpoint, each replica's version and ``ReplicaStatus``), update
``update_version`` (``ServiceVersionRequest`` -> ``ServiceVersionAccepted``), and Temporal's cancel
for ``serve down``, which ends it once every replica and the load balancer are gone. Each replica is
a cluster of its own (``replica_cluster_name``) whose run listens on ``SKYHOP_SERVE_PORT``.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, Field, model_validator

from skyhop.providers.base import ClusterHandle
from skyhop.serve.autoscaler import AutoscalerState
from skyhop.spec import Task

__all__ = [
    "MAX_SERVICE_NAME_CHARS",
    "ROLLBACK_AFTER",
    "SERVE_PORT_ENV",
    "SERVICE_NAME_PATTERN",
    "LoadBalancerInfo",
    "LoadBalancerReady",
    "LoadBalancerStats",
    "LoadBalancingPolicy",
    "ReplicaEndpoint",
    "ReplicaLoad",
    "ReplicaSetAccepted",
    "ReplicaRecord",
    "ReplicaSetUpdate",
    "ReplicaStatus",
    "ServiceOperation",
    "ServiceQuery",
    "ServiceRequest",
    "ServiceResume",
    "ServiceState",
    "ServiceStatus",
    "ServiceVersionAccepted",
    "ServiceUpdate",
    "ServiceVersionRequest",
    "UpdateMode",
    "replica_cluster_name",
    "service_workflow_id",
]

MAX_SERVICE_NAME_CHARS = 40
"""A replica's cluster name (``<service>-replica-<id>``) must stay a valid cluster name (63)."""
SERVICE_NAME_PATTERN = r"^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$"
SERVE_PORT_ENV = "SKYHOP_SERVE_PORT"
"""The port a replica's run must listen on: the service's ``ports``, unless replicas share a host
(the ``local`` provider), where each gets a free one."""


class LoadBalancingPolicy(StrEnum):
    """How the load balancer picks a READY replica (the spec's ``load_balancing_policy``)."""

    LEAST_LOAD = "least_load"
    """Fewest requests in flight; ties go round the replicas, so an idle service spreads too."""
    ROUND_ROBIN = "round_robin"
    """Each replica in turn."""


class ReplicaEndpoint(BaseModel):
    """A READY replica the load balancer may send requests to (plain HTTP/1.1)."""

    replica_id: int = Field(ge=0)
    host: str = Field(min_length=1, max_length=253)
    port: int = Field(ge=1, le=65535)


class ReplicaSetUpdate(BaseModel):
    """The whole READY set: a replica left out gets no new request (those in flight finish)."""

    replicas: list[ReplicaEndpoint] = Field(max_length=1024)


class ReplicaSetAccepted(BaseModel):
    """The set is in force: ``generation`` counts the pushes this load balancer took."""

    generation: int
    replicas: int


class ReplicaLoad(BaseModel):
    """One replica's requests, as the load balancer sent them."""

    replica_id: int
    in_flight: int
    """Requests sent to it and not yet answered to the end (0 when idle, whatever went wrong)."""
    total: int
    """Requests sent to it since the load balancer started (retries count once per replica)."""
    failed: int
    """Requests whose connection to it failed (refused, reset, timed out)."""
    window_requests: int
    """Requests sent to it in the last ``LoadBalancerStats.window_seconds``."""
    cooling: float = 0.0
    """Seconds it is still passed over after refusing a connection (0: taking requests)."""


class LoadBalancerStats(BaseModel):
    """What the autoscaler reads: requests per replica, and the demand the service saw."""

    window_seconds: int
    window_requests: int
    """Client requests in the window, those held for want of a replica (scale from zero) included."""
    held: int
    """Client requests waiting right now for a READY replica."""
    replicas: list[ReplicaLoad]
    """The replicas of the current set, in the order they were pushed."""
    generation: int


class LoadBalancerReady(BaseModel):
    """The one line a starting load balancer prints on stdout once both ports listen."""

    pid: int
    host: str
    port: int
    control_port: int


class ReplicaStatus(StrEnum):
    """Where one replica stands (SkyServe's names). Values are stable: new ones are only added.

    A replica in any ``failed`` state is being replaced, as FAILED always was; which one says why.
    """

    PENDING = "PENDING"
    """Wanted, but not launched yet: it waits for the relaunch back-off after replicas that failed
    before they were ever READY."""
    PROVISIONING = "PROVISIONING"
    """Its cluster is being brought up (with failover)."""
    STARTING = "STARTING"
    """Set up and running; not yet answering its readiness probe (within ``initial_delay_seconds``)."""
    READY = "READY"
    """Answers its probe: the load balancer sends it requests."""
    NOT_READY = "NOT_READY"
    """Was READY, now fails its probe: no new requests; replaced if it does not recover in time."""
    FAILED = "FAILED"
    """Its run ended with a failure, it could not be started, or its cluster could not be removed."""
    FAILED_INITIAL_DELAY = "FAILED_INITIAL_DELAY"
    """Never answered its probe within ``initial_delay_seconds``."""
    FAILED_PROBING = "FAILED_PROBING"
    """Was READY, then failed its probe for longer than ``consecutive_failure_threshold_timeout``."""
    PREEMPTED = "PREEMPTED"
    """Its run ended or its probe failed, and the provider says its nodes are gone (preempted)."""
    SHUTTING_DOWN = "SHUTTING_DOWN"
    """Its cluster is being removed (scaled down, an older version, or ``serve down``)."""

    @property
    def failed(self) -> bool:
        """Failed in any way: no longer live, being removed, then replaced."""
        return self in _FAILED_STATUSES

    @property
    def settled(self) -> bool:
        """Up and probed (the replica holds nothing in flight): a safe point to continue as new."""
        return self in (ReplicaStatus.READY, ReplicaStatus.NOT_READY)


_FAILED_STATUSES = frozenset(
    {
        ReplicaStatus.FAILED,
        ReplicaStatus.FAILED_INITIAL_DELAY,
        ReplicaStatus.FAILED_PROBING,
        ReplicaStatus.PREEMPTED,
    }
)


class ServiceStatus(StrEnum):
    STARTING = "STARTING"
    """No replica has been READY yet."""
    READY = "READY"
    """At least one replica is READY."""
    NO_REPLICA = "NO_REPLICA"
    """None READY now (scaled to zero, or every replica failed and is being replaced)."""
    SHUTTING_DOWN = "SHUTTING_DOWN"
    DOWN = "DOWN"
    """Every replica and the load balancer are gone (the workflow's result)."""


class LoadBalancerInfo(BaseModel):
    """The service's load balancer process, on the worker's host that started it."""

    pid: int
    host: str
    port: int
    control_port: int
    log: str
    """Its log file (``serve logs NAME --load-balancer``)."""

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"


class ReplicaRecord(BaseModel):
    replica_id: int
    version: int
    status: ReplicaStatus
    cluster_name: str
    launched_at: float
    use_spot: bool = False
    """Launched on spot; an on-demand replica of a task that asks for spot is a fallback one."""
    handle: ClusterHandle | None = None
    """Its nodes, once up."""
    port: int | None = None
    """Where its run listens (``SERVE_PORT_ENV``)."""
    job_key: str | None = None
    """Its run's node job (its log), once started."""
    ready_at: float | None = None
    failing_since: float | None = None
    """When the current run of failed probes began (workflow time)."""
    message: str | None = None
    """Why it failed (any ``failed`` status) or is NOT_READY (the last probe's answer)."""

    @property
    def host(self) -> str | None:
        return self.handle.nodes[0].ip if self.handle is not None and self.handle.nodes else None

    def endpoint(self) -> ReplicaEndpoint | None:
        """Its address for the load balancer, while READY."""
        host = self.host
        if self.status != ReplicaStatus.READY or host is None or self.port is None:
            return None
        return ReplicaEndpoint(replica_id=self.replica_id, host=host, port=self.port)


class UpdateMode(StrEnum):
    """How ``serve update`` moves traffic to the new version."""

    ROLLING = "rolling"
    """One new replica at a time; an old one goes as each new one is READY (the default)."""
    BLUE_GREEN = "blue_green"
    """The new version's whole set comes up READY, then traffic switches to it in one push."""


class ServiceUpdate(BaseModel):
    """An update in progress: from ``previous`` (whose replicas serve until it is done) to ``version``."""

    version: int
    previous: int
    """The version to roll back to: the last one whose update completed."""
    mode: UpdateMode = UpdateMode.ROLLING
    failed_starts: int = 0
    """Its replicas that failed before they were ever READY (at ``ROLLBACK_AFTER``: rolled back)."""


ROLLBACK_AFTER = 3
"""A new version's replicas that fail before they are READY this many times roll the update back."""


class ServiceState(BaseModel):
    """The ``state`` query's answer, and what ``serve status`` shows."""

    name: str
    user: str
    status: ServiceStatus = ServiceStatus.STARTING
    version: int = 1
    """The version new replicas run (``serve update`` adds one)."""
    target: int = 0
    """Replicas of ``version`` the autoscaler wants now (on-demand fallback ones included)."""
    ondemand_target: int | None = None
    """Of ``target``, how many run on-demand when the task asks for spot
    (``base_ondemand_fallback_replicas``, and with ``dynamic_ondemand_fallback`` one for each spot
    replica not READY); None: all as the task asks."""
    load_balancer: LoadBalancerInfo | None = None
    replicas: list[ReplicaRecord] = []
    """Live replicas, oldest first (a removed one leaves the list)."""
    next_replica_id: int = 1
    replaced: int = 0
    """Replicas that failed and were replaced since the service started."""
    failed_starts: int = 0
    """Replicas in a row that failed before they were ever READY: each waits longer to relaunch."""
    relaunch_at: float | None = None
    """No replica is launched before this (workflow time), after such failures."""
    message: str | None = None
    """The last thing that went wrong with the service itself (its load balancer)."""
    update: ServiceUpdate | None = None
    """The update in progress, if any."""
    update_message: str | None = None
    """What became of the last update when it did not complete (rolled back, and why)."""
    latest_version: int = 0
    """The highest version ever given (a rolled-back one's number is not given again)."""
    started_at: float = 0.0

    @model_validator(mode="after")
    def _latest(self) -> ServiceState:
        self.latest_version = max(self.latest_version, self.version)
        return self

    @property
    def endpoint(self) -> str | None:
        return self.load_balancer.endpoint if self.load_balancer is not None else None


class ServiceResume(BaseModel):
    """What a run that continued as new carries: the state, each live version's task, the autoscaler."""

    state: ServiceState
    tasks: dict[int, Task]
    autoscaler: AutoscalerState


class ServiceRequest(BaseModel):
    """``ServiceWorkflow``'s input: the service's first version (the task has a ``service:``)."""

    name: str = Field(pattern=SERVICE_NAME_PATTERN)
    task: Task
    user: str = "unknown"
    history_limit: int | None = None
    """Continue as new after this many events (None: when Temporal suggests it)."""
    resume: ServiceResume | None = None


class ServiceVersionRequest(BaseModel):
    """``serve update``: move every replica to ``task``; new replicas are READY before old ones go."""

    task: Task
    mode: UpdateMode = UpdateMode.ROLLING


class ServiceVersionAccepted(BaseModel):
    version: int


class ServiceQuery(StrEnum):
    STATE = "state"


class ServiceOperation(StrEnum):
    UPDATE_VERSION = "update_version"


def service_workflow_id(name: str) -> str:
    return f"service:{name}"


def replica_cluster_name(service: str, replica_id: int) -> str:
    return f"{service}-replica-{replica_id}"
