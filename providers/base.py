"""The provider interface: the only place where infrastructure specifics live.

A provider turns a ``ProvisionRequest`` (what the optimizer chose, and how: market, image, ports)
into a ``ClusterHandle`` (running nodes) through its one entry point, ``launch``, and gives a
``NodeRuntime`` per node through which files are synced and jobs run. Every method is idempotent,
because Temporal retries activities: ``launch`` first looks for nodes that already belong to the
cluster and creates only what is missing.

What a provider can do is data (``Capabilities``), and what a request needs is data too
(``Needs``): ``Capabilities.shortfall`` compares them, so the optimizer leaves an incapable
provider out before any attempt, and ``launch`` refuses the same request with the same words.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Hashable
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from skyhop.providers.errors import NotSupportedError
from skyhop.providers.overrides import ProviderOverrides
from skyhop.providers.runtime.jobs import JobSpec, JobsQuery, JobsReport, NodeJobState

__all__ = [
    "AcceleratorArgs",
    "CannotStopError",
    "Capabilities",
    "CheckResult",
    "DiskTier",
    "ClusterHandle",
    "KubernetesAccess",
    "LocalAccess",
    "Needs",
    "NetworkTier",
    "NodeRequest",
    "NodeAccess",
    "NodeHandle",
    "NodeRuntime",
    "NodeStatus",
    "Offering",
    "Provider",
    "ProvisionRequest",
    "Shortfall",
    "SshAccess",
    "StatusUnknownError",
]


class CannotStopError(Exception):
    """The provider has no stop/start (its nodes can only be created and removed)."""


class StatusUnknownError(Exception):
    """The provider cannot report the real state of its nodes."""


class DiskTier(StrEnum):
    """SkyPilot's ``resources.disk_tier``: how fast the boot disk is; each provider maps it to a disk type."""

    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    ULTRA = "ultra"
    BEST = "best"
    """The fastest tier the chosen provider has."""


class NetworkTier(StrEnum):
    """SkyPilot's ``resources.network_tier``."""

    STANDARD = "standard"
    """The provider's default networking."""
    BEST = "best"
    """The fastest networking the instance type offers (GCP: gVNIC; Azure: accelerated networking)."""


class NodeStatus(StrEnum):
    """A node's state as the provider sees it."""

    UP = "UP"
    STOPPED = "STOPPED"
    TERMINATED = "TERMINATED"
    """Gone: never created, removed, or removed outside skyhop."""
    PREEMPTED = "PREEMPTED"
    """Taken back by the cloud (a spot instance reclaimed): gone, but not by anyone's choice, so a
    managed job can tell it from a user's ``down`` and recover elsewhere."""

    @property
    def gone(self) -> bool:
        """The node no longer exists, whoever removed it."""
        return self in (NodeStatus.TERMINATED, NodeStatus.PREEMPTED)

    def describe_node(self, rank: int) -> str:
        """How node ``rank`` found in this state is reported (``node 1 was preempted``)."""
        return (
            f"node {rank} was preempted" if self is NodeStatus.PREEMPTED else f"node {rank} is {self.value}"
        )


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
    preference: int = 0
    """Order among offerings otherwise equal, lowest first, ahead of the region's name: a provider
    whose user ranks its regions says so here (Kubernetes: the context's place in
    ``allowed_contexts``, the failover order SkyPilot documents). 0 where regions are equals."""
    divisible: bool = False
    """The offering is free capacity a node takes a part of (a Kubernetes node's room for pods): a
    request fits when it asks for no more than is free, and the node gets what it asked for."""
    host: str | None = None
    """The machine (``home.host_id``) the offering is on, for providers whose nodes are that
    machine's folders (``local``): every activity on such a cluster runs on that machine's task
    queues. None: any worker reaches it."""

    @property
    def location(self) -> str:
        """``provider/region/zone`` with the parts that exist."""
        return "/".join(p for p in (self.provider, self.region, self.zone) if p)


class LocalAccess(BaseModel):
    """A node that is a folder on the worker's machine (``local``, ``sim``): reached without a network."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["local"] = "local"
    netns: str | None = None
    """The network namespace its processes run in (a ``sim`` node with an address of its own)."""


class SshAccess(BaseModel):
    """A node reached over SSH (cloud instances, SSH pool hosts)."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["ssh"] = "ssh"
    user: str | None = None
    """Login of the command runner. None only in records written before access was typed, for
    SSH pool hosts, whose login the pool's inventory holds."""
    port: int = 22
    public_ip: str | None = None
    """Address reachable from outside the node's network, where it has one."""


class KubernetesAccess(BaseModel):
    """A pod, reached through the API server's exec (no SSH in the pod)."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["kubernetes"] = "kubernetes"
    context: str
    """The kubeconfig context of its cluster."""
    namespace: str
    pod: str


NodeAccess = Annotated[LocalAccess | SshAccess | KubernetesAccess, Field(discriminator="kind")]
"""How the command runner reaches a node."""

_SSH_RUNTIME_MARK = "/.skyhop-node/"
"""In the runtime folder of every node reached over SSH (``providers.ssh.runtime.runtime_dir``)."""


class NodeHandle(BaseModel):
    """How to reach one node of a cluster."""

    model_config = ConfigDict(frozen=True)

    rank: int
    instance_id: str
    ip: str
    """The node's address inside its network (where the cluster's nodes reach each other)."""
    runtime_dir: str
    """Folder on the node that holds skyhop's runner, the workdir and job records."""
    access: NodeAccess

    @model_validator(mode="before")
    @classmethod
    def _flat_ssh_fields(cls, data: Any) -> Any:
        """Read a handle written before ``access`` existed, with SSH fields on every node.

        Cluster records outlive workers: a cluster brought up by an older worker carries its node
        handles in its workflow history and continue-as-new input, and recorded histories replay
        them. Such a node had ``ssh_user``, ``ssh_port`` and ``public_ip`` beside its address; it
        was reached over SSH when it had a login, or a public address, or an SSH runtime folder (an
        SSH pool host, whose login the inventory holds). The new shape is what is written back.
        """
        if not isinstance(data, dict) or "access" in data:
            return data
        data = dict(data)
        user = data.pop("ssh_user", None)
        port = data.pop("ssh_port", 22)
        public_ip = data.pop("public_ip", None)
        over_ssh = (
            user is not None or public_ip is not None or _SSH_RUNTIME_MARK in str(data.get("runtime_dir"))
        )
        data["access"] = SshAccess(user=user, port=port, public_ip=public_ip) if over_ssh else LocalAccess()
        return data


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

    def request(self) -> ProvisionRequest:
        """What the handle itself tells of how its nodes were provisioned: offering, count, market."""
        return ProvisionRequest(
            cluster_name=self.cluster_name,
            offering=self.offering,
            num_nodes=len(self.nodes),
            use_spot=self.use_spot,
        )


class Needs(BaseModel):
    """What a request needs from a provider beyond an offering's size and price."""

    model_config = ConfigDict(frozen=True)

    num_nodes: int = 1
    spot: bool = False
    ports: bool = False
    custom_image: bool = False
    disk_size: bool = False
    disk_tier: DiskTier | None = None
    labels: bool = False
    priority_class: bool = False
    absolute_mount: str | None = None
    """The first file mount whose target is an absolute path, if any."""
    pod_incompatible_option: str | None = None
    """The first of the task's ``config.docker.run_options`` that a pod has no equivalent for
    (``providers.pod_run_options``), if any."""


class Shortfall(BaseModel):
    """The first thing a provider lacks for a request: the task field that asks for it, and what it is."""

    model_config = ConfigDict(frozen=True)

    field: str
    """Where the task asks for it, as a field path (``resources.ports``)."""
    feature: str
    """What the provider cannot do, completing "<provider> does not support ..."."""


class Capabilities(BaseModel):
    """What a provider can do; a task that needs more fails over to another provider."""

    model_config = ConfigDict(frozen=True)

    spot: bool = False
    stop_start: bool = False
    multi_node: bool = True
    open_ports: bool = False
    custom_image: bool = False
    docker: bool = False
    disk_size: bool = False
    """Whether a node's boot disk can be given a size."""
    disk_tiers: frozenset[DiskTier] = frozenset()
    """The disk tiers its nodes' boot disks can have (``best`` is the fastest of them, or the disk its
    nodes have where there are none)."""
    labels: bool = False
    """Whether its nodes carry the task's ``resources.labels`` (as tags or labels)."""
    priority_classes: bool = False
    """Whether its nodes take a ``resources.priority_class`` (Kubernetes pods)."""
    max_nodes: int | None = None
    """Most nodes one cluster may have here; None: only the absolute bound (``spec.limits``)."""
    container_nodes: bool = False
    """Whether each node already is the task's container (a pod runs ``image_id: docker:IMAGE``
    itself), so the node runner starts no docker/podman container inside it."""
    absolute_paths: bool = True
    """Whether file mounts may target absolute paths. False where a node is a folder on this
    machine: its jobs see this machine's files, so ``/etc/x`` would be this machine's."""

    def shortfall(self, needs: Needs) -> Shortfall | None:
        """The first feature ``needs`` asks for that these capabilities lack, or None."""
        wanted = [
            (needs.spot and not self.spot, "resources.use_spot", "spot instances"),
            (needs.num_nodes > 1 and not self.multi_node, "num_nodes", "multi-node clusters"),
            (
                self.max_nodes is not None and needs.num_nodes > self.max_nodes,
                "num_nodes",
                f"more than {self.max_nodes} nodes (got {needs.num_nodes})",
            ),
            (needs.ports and not self.open_ports, "resources.ports", "opening ports"),
            (needs.custom_image and not self.custom_image, "resources.image_id", "custom images"),
            (needs.disk_size and not self.disk_size, "resources.disk_size", "setting the disk size"),
            (
                # ``best`` asks for the fastest disk the provider has, as in SkyPilot: any provider
                # serves it (one without tiers, with the disk its nodes have).
                needs.disk_tier not in (None, DiskTier.BEST) and needs.disk_tier not in self.disk_tiers,
                "resources.disk_tier",
                f"disk tier {needs.disk_tier}",
            ),
            (needs.labels and not self.labels, "resources.labels", "labels on its nodes"),
            (
                needs.priority_class and not self.priority_classes,
                "resources.priority_class",
                "priority classes (a Kubernetes PriorityClass)",
            ),
            (
                needs.absolute_mount is not None and not self.absolute_paths,
                "file_mounts",
                f"absolute file mount targets ({needs.absolute_mount!r} is absolute, but its nodes are "
                "folders on this machine, whose jobs see this machine's files; use a path under ~, "
                "like ~/data.csv)",
            ),
            (
                needs.pod_incompatible_option is not None and self.container_nodes,
                "config.docker.run_options",
                f"the docker run option {needs.pod_incompatible_option!r} (each node is a pod that is "
                "the container itself; use config.kubernetes.pod_config)",
            ),
        ]
        return next((Shortfall(field=f, feature=what) for missing, f, what in wanted if missing), None)


class NodeRequest(BaseModel):
    """What the task asks of each node (its ``resources``), beside the offering it fits in.

    A provider whose node is a slice of a machine (a Kubernetes pod) asks for this, not for the
    whole offering, so two 1-GPU tasks share a 2-GPU machine; a VM provider launches the offering.
    None stands for what the task left open (the provider's default).
    """

    model_config = ConfigDict(frozen=True)

    cpus: float | None = None
    memory_gib: float | None = None
    memory_per_cpu: float | None = None
    """GiB per vCPU (``memory: x4``), when memory is asked that way."""
    accelerators: dict[str, float] = {}
    """Whole accelerators per node (a fraction is the GPUs holding it)."""


class AcceleratorArgs(BaseModel):
    """SkyPilot's ``resources.accelerator_args`` for a TPU VM: what a provision attempt does with them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    runtime_version: str | None = None
    """The TPU software the VM boots (``tpu-vm-base``); None: the slice's base runtime."""
    tpu_name: str | None = None
    """The TPU node's name (rank 0's; rank N's adds ``-N``); None: named after the cluster."""


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
    disk_tier: DiskTier | None = None
    """The boot disk's tier; None for the provider's default."""
    network_tier: NetworkTier | None = None
    """None or ``standard``: the provider's default networking."""
    labels: dict[str, str] = {}
    """The task's ``resources.labels``, put on every node beside skyhop's own tags."""
    priority_class: str | None = None
    """The task's ``resources.priority_class``: the pods' Kubernetes PriorityClass."""
    volumes: dict[str, str] = {}
    """The task's ``volumes``: mount path -> the Kubernetes PVC mounted there on every node."""
    attempt_id: str = ""
    """Same for every retry of one attempt, different across attempts: a cloud idempotency token."""
    node_request: NodeRequest | None = None
    """The task's own per-node ask; None when unknown (the whole offering is the node)."""
    container_image: str | None = None
    """The task's ``image_id: docker:IMAGE``: a provider with ``container_nodes`` boots its nodes
    from it; others ignore it (the node runner starts the container on the node)."""
    accelerator_args: AcceleratorArgs | None = None
    """The task's TPU options, for an offering that is a TPU slice."""
    overrides: ProviderOverrides = ProviderOverrides()
    """The task's provider settings (its ``config:`` section); each provider reads its own."""
    scale_up_region: str | None = None
    """The region whose autoscaler an earlier attempt of this launch asked for nodes (it failed with
    ``SCALE_UP_ASKED``), or None. Only there may this attempt wait for new nodes; elsewhere it takes
    what is free or fails at once, so one launch never makes two clusters scale up."""

    @property
    def needs(self) -> Needs:
        """What this attempt needs of its provider."""
        return Needs(
            num_nodes=self.num_nodes,
            spot=self.use_spot,
            ports=bool(self.ports),
            custom_image=self.image_id is not None,
            disk_size=self.disk_size is not None,
            disk_tier=self.disk_tier,
            labels=bool(self.labels),
            priority_class=self.priority_class is not None,
        )


class CheckResult(BaseModel):
    """Whether a provider's credentials are found and usable (``skyhop check``)."""

    enabled: bool
    reason: str = ""
    """Why it is disabled, or who it authenticates as."""
    hint: str = ""
    """How to set the credentials up, when they are missing or rejected."""


class NodeRuntime(ABC):
    """Files and jobs on one node; the same operations for a local folder or an SSH host."""

    in_process = False
    """Its questions about jobs and logs are file reads in this process, answered without waiting:
    a watch hub asks such nodes one after another, without a task for each (``local``, ``sim``)."""

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

    def runner_pid(self, key: str) -> int | None:
        """The pid of the running job's runner, a process of this machine, for a runtime in this
        process (``in_process``) that read the job RUNNING; None when it cannot tell. The runner
        exits once the job's end is recorded, so its exit is the job's end (``activities.runner_exits``)."""
        return None


class Provider(ABC):
    """An infrastructure skyhop can run clusters on."""

    name: ClassVar[str]
    capabilities: ClassVar[Capabilities] = Capabilities()

    @abstractmethod
    def offerings(self) -> list[Offering]:
        """Everything this provider can launch, from its catalog (or what ``load`` fetched)."""

    async def load(self) -> None:
        """Fetch what ``offerings`` reads that this process does not hold (SSH pools are in
        Temporal); the optimizer calls it first, as ``offerings`` is synchronous. Default: nothing."""
        return None

    def offerings_stamp(self) -> Hashable | None:
        """Equal whenever ``offerings`` would return the same (after ``load``): the optimizer's
        plans are cached by it. None: this provider cannot tell without asking what ``offerings``
        asks (plans are then not cached). Default: the offerings themselves, for providers with few."""
        return tuple(offering.model_dump_json() for offering in self.offerings())

    @abstractmethod
    async def launch(self, request: ProvisionRequest) -> ClusterHandle:
        """Bring up the request's nodes, reusing any that exist; ``ProviderError`` subclasses say how
        far a failure reaches. Starts with ``refuse_unsupported``."""

    @abstractmethod
    async def terminate(self, handle: ClusterHandle) -> None:
        """Remove every node of the cluster and whatever runs on it (idempotent)."""

    @abstractmethod
    def runtime(self, node: NodeHandle) -> NodeRuntime:
        """The runtime of one node."""

    def refuse_unsupported(self, request: ProvisionRequest) -> None:
        """Raise ``NotSupportedError`` for a request the optimizer should have left out (nothing created)."""
        shortfall = self.capabilities.shortfall(request.needs)
        if shortfall is not None:
            raise NotSupportedError(
                f"{self.name} does not support {shortfall.feature}", "Unsupported", leftover=False
            )

    async def open_ports(self, handle: ClusterHandle, ports: list[str]) -> None:
        """Let traffic from anywhere reach ``ports`` on every node (idempotent)."""
        raise NotSupportedError(f"{self.name} cannot open ports", "Unsupported")

    async def check(self) -> CheckResult:
        """Whether credentials are found and usable; needs none unless a provider says otherwise."""
        return CheckResult(enabled=True)

    async def stop(self, handle: ClusterHandle) -> None:
        """Stop every node, keeping its disk (idempotent); CannotStopError where impossible."""
        raise CannotStopError(f"provider {self.name!r} cannot stop clusters")

    async def start(self, handle: ClusterHandle, request: ProvisionRequest | None = None) -> ClusterHandle:
        """Start the stopped nodes again (idempotent); their addresses may change.

        ``request`` is how the nodes were provisioned (default: what the handle tells): a node that
        is gone is re-created as it says.
        """
        raise CannotStopError(f"provider {self.name!r} cannot start stopped clusters")

    async def remove_untracked(self, cluster_name: str) -> list[str]:
        """Remove the cluster's nodes found without its record (its workflow is stuck); their ids.

        The default finds nothing: a provider whose nodes cannot be found by name alone.
        """
        return []

    async def node_statuses(self, handle: ClusterHandle) -> list[NodeStatus]:
        """The real state of each node, in rank order; StatusUnknownError where unavailable."""
        raise StatusUnknownError(f"provider {self.name!r} cannot report the state of its nodes")
