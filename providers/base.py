"""The provider interface: the only place where infrastructure specifics live.

A provider turns an ``Offering`` (what the optimizer chose) into a ``ClusterHandle`` (running
nodes), and gives a ``NodeRuntime`` per node through which files are synced and jobs run.
Every method is idempotent, because Temporal retries activities: ``provision`` first looks for
nodes that already belong to the cluster and creates only what is missing.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from enum import StrEnum
from typing import ClassVar

from pydantic import BaseModel, ConfigDict

from providers.errors import NotSupportedError
from providers.runtime.jobs import JobSpec, JobsQuery, JobsReport, NodeJobState

__all__ = [
    "CannotStopError",
    "Capabilities",
    "CheckResult",
    "ClusterHandle",
    "NodeHandle",
    "NodeRuntime",
    "NodeStatus",
    "Offering",
    "Provider",
    "ProvisionRequest",
    "StatusUnknownError",
]


class CannotStopError(Exception):
    """The provider has no stop/start (its nodes can only be created and removed)."""


class StatusUnknownError(Exception):
    """The provider cannot report the real state of its nodes."""


class NodeStatus(StrEnum):
    """A node's state as the provider sees it."""

    UP = "UP"
    STOPPED = "STOPPED"
    TERMINATED = "TERMINATED"
    """Gone: never created, removed, or removed outside skyhop."""


class Offering(BaseModel):
    """One launchable choice: an instance type in a location at a price."""

    model_config = ConfigDict(frozen=True)

    provider: str
    instance_type: str
    cpus: float
    memory_gib: float
    accelerators: dict[str, float] = {}
    region: str | None = None
    zone: str | None = None
    price: float
    """On-demand $/hour per node."""
    spot_price: float | None = None
    """Spot $/hour per node, or None where spot is not offered."""

    @property
    def location(self) -> str:
        """``provider/region/zone`` with the parts that exist."""
        return "/".join(p for p in (self.provider, self.region, self.zone) if p)


class NodeHandle(BaseModel):
    """How to reach one node of a cluster."""

    model_config = ConfigDict(frozen=True)

    rank: int
    instance_id: str
    ip: str
    runtime_dir: str
    """Folder on the node that holds skyhop's runner, the workdir and job records."""
    public_ip: str | None = None
    """Address reachable from outside the node's network, where it has one."""
    ssh_user: str | None = None
    """Login of the command runner; None for nodes reached without SSH (local, sim)."""
    ssh_port: int = 22


class ClusterHandle(BaseModel):
    """A provisioned cluster: where it is and its nodes in rank order (head first)."""

    model_config = ConfigDict(frozen=True)

    cluster_name: str
    offering: Offering
    use_spot: bool = False
    nodes: list[NodeHandle]

    @property
    def head(self) -> NodeHandle:
        """The rank-0 node."""
        return self.nodes[0]


class Capabilities(BaseModel):
    """What a provider can do; a task that needs more fails over to another provider."""

    model_config = ConfigDict(frozen=True)

    spot: bool = False
    stop_start: bool = False
    multi_node: bool = True
    open_ports: bool = False
    custom_image: bool = False
    docker: bool = False
    max_nodes: int | None = None
    """Most nodes one cluster may have here; None: only the absolute bound (``spec.limits``)."""
    absolute_paths: bool = True
    """Whether file mounts may target absolute paths. False where a node is a folder on this
    machine: its jobs see this machine's files, so ``/etc/x`` would be this machine's."""


class ProvisionRequest(BaseModel):
    """One provision attempt: ``num_nodes`` nodes of ``offering`` in its region/zone."""

    model_config = ConfigDict(frozen=True)

    cluster_name: str
    offering: Offering
    num_nodes: int = 1
    use_spot: bool = False
    ports: list[str] = []
    image_id: str | None = None
    disk_size: int | None = None
    """GiB of the boot disk; None for the provider's default."""
    attempt_id: str = ""
    """Same for every retry of one attempt, different across attempts: a cloud idempotency token."""


class CheckResult(BaseModel):
    """Whether a provider's credentials are found and usable (``skyhop check``)."""

    enabled: bool
    reason: str = ""
    """Why it is disabled, or who it authenticates as."""
    hint: str = ""
    """How to set the credentials up, when they are missing or rejected."""


class NodeRuntime(ABC):
    """Files and jobs on one node; the same operations for a local folder or an SSH host."""

    @abstractmethod
    async def prepare(self) -> None:
        """Create the runtime folder and install the node-side runner (idempotent)."""

    @abstractmethod
    async def sync_dir(self, local_dir: str, remote_path: str) -> None:
        """Make ``remote_path`` (relative to the runtime folder, or absolute) mirror ``local_dir``."""

    @abstractmethod
    async def put_path(self, local_path: str, remote_path: str) -> None:
        """Copy a local file or folder to ``remote_path`` (absolute, or relative to the home)."""

    @abstractmethod
    async def start_job(self, spec: JobSpec) -> None:
        """Start ``spec`` detached; starting the same ``spec.key`` twice runs it once."""

    @abstractmethod
    async def job_state(self, key: str) -> NodeJobState | None:
        """The job's state on this node, or None if it was never started here."""

    @abstractmethod
    async def watch_jobs(self, query: JobsQuery) -> JobsReport:
        """Several jobs' states and the newer jobs, in one question to the node (``node_runner.watch``)."""

    @abstractmethod
    async def read_log(self, key: str, offset: int, limit: int = 1 << 20) -> bytes:
        """Up to ``limit`` bytes of the job's log from ``offset`` (b"" when nothing new)."""

    @abstractmethod
    async def cancel_job(self, key: str) -> None:
        """Stop the job's processes on this node (no-op if it is not running)."""


class Provider(ABC):
    """An infrastructure skyhop can run clusters on."""

    name: ClassVar[str]
    capabilities: ClassVar[Capabilities] = Capabilities()

    @abstractmethod
    def offerings(self) -> list[Offering]:
        """Everything this provider can launch, from its catalog."""

    @abstractmethod
    async def provision(self, cluster_name: str, offering: Offering, num_nodes: int) -> ClusterHandle:
        """Bring up ``num_nodes`` nodes of ``offering`` for the cluster, reusing any that exist."""

    @abstractmethod
    async def terminate(self, handle: ClusterHandle) -> None:
        """Remove every node of the cluster and whatever runs on it (idempotent)."""

    @abstractmethod
    def runtime(self, node: NodeHandle) -> NodeRuntime:
        """The runtime of one node."""

    def unsupported(self, request: ProvisionRequest) -> str | None:
        """The first feature ``request`` needs that this provider lacks, or None."""
        caps = self.capabilities
        wanted = [
            (request.use_spot and not caps.spot, "spot instances"),
            (request.num_nodes > 1 and not caps.multi_node, "multi-node clusters"),
            (
                caps.max_nodes is not None and request.num_nodes > caps.max_nodes,
                f"over {caps.max_nodes} nodes",
            ),
            (bool(request.ports) and not caps.open_ports, "opening ports"),
            (request.image_id is not None and not caps.custom_image, "custom images"),
        ]
        return next((feature for missing, feature in wanted if missing), None)

    async def launch(self, request: ProvisionRequest) -> ClusterHandle:
        """One provision attempt; ``ProviderError`` subclasses say how far a failure reaches."""
        feature = self.unsupported(request)
        if feature is not None:
            raise NotSupportedError(f"{self.name} does not support {feature}", "Unsupported")
        handle = await self.provision(request.cluster_name, request.offering, request.num_nodes)
        return handle.model_copy(update={"use_spot": request.use_spot})

    async def open_ports(self, handle: ClusterHandle, ports: list[str]) -> None:
        """Let traffic from anywhere reach ``ports`` on every node (idempotent)."""
        raise NotSupportedError(f"{self.name} cannot open ports", "Unsupported")

    async def check(self) -> CheckResult:
        """Whether credentials are found and usable; needs none unless a provider says otherwise."""
        return CheckResult(enabled=True)

    async def stop(self, handle: ClusterHandle) -> None:
        """Stop every node, keeping its disk (idempotent); CannotStopError where impossible."""
        raise CannotStopError(f"provider {self.name!r} cannot stop clusters")

    async def start(self, handle: ClusterHandle) -> ClusterHandle:
        """Start the stopped nodes again (idempotent); their addresses may change."""
        raise CannotStopError(f"provider {self.name!r} cannot start stopped clusters")

    async def node_statuses(self, handle: ClusterHandle) -> list[NodeStatus]:
        """The real state of each node, in rank order; StatusUnknownError where unavailable."""
        raise StatusUnknownError(f"provider {self.name!r} cannot report the state of its nodes")
