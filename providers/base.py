"""The provider interface: the only place where infrastructure specifics live.

A provider turns an ``Offering`` (what the optimizer chose) into a ``ClusterHandle`` (running
nodes), and gives a ``NodeRuntime`` per node through which files are synced and jobs run.
Every method is idempotent, because Temporal retries activities: ``provision`` first looks for
nodes that already belong to the cluster and creates only what is missing.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

from pydantic import BaseModel, ConfigDict

from providers.runtime.jobs import JobSpec, NodeJobState

__all__ = ["ClusterHandle", "NodeHandle", "NodeRuntime", "Offering", "Provider"]


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
    async def read_log(self, key: str, offset: int, limit: int = 1 << 20) -> bytes:
        """Up to ``limit`` bytes of the job's log from ``offset`` (b"" when nothing new)."""

    @abstractmethod
    async def cancel_job(self, key: str) -> None:
        """Stop the job's processes on this node (no-op if it is not running)."""


class Provider(ABC):
    """An infrastructure skyhop can run clusters on."""

    name: ClassVar[str]

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
