"""The ``ssh`` provider: hosts the user owns, in named pools, each held by one cluster at a time.

A pool is a region (``--infra ssh/<pool>``) and each distinct host shape in it (CPUs, memory,
GPUs) is an offering at price 0. Provisioning takes free hosts of that shape exclusively (the
allocation is recorded before anything is touched, so a retry reuses the same hosts), wipes what
an earlier cluster may have left in the node's runtime folder, and installs the node runner.
Terminating stops the cluster's jobs, removes its folders and gives the hosts back. Pools and
allocations are in ``SSHPoolsWorkflow`` (``providers.ssh.deployment``), so any worker can do
either, on any machine.
"""

from __future__ import annotations

import asyncio
import logging

from skyhop.contract.ssh_pools import (
    AllocatedHosts,
    AllocateHosts,
    MarkPrepared,
    ReleaseHosts,
    SSHPoolsUpdate,
)
from skyhop.providers.base import (
    Capabilities,
    CheckResult,
    ClusterHandle,
    NodeHandle,
    Offering,
    Provider,
    ProvisionRequest,
    SshAccess,
)
from skyhop.providers.errors import CapacityError
from skyhop.providers.runtime.errors import NodeUnreachableError
from skyhop.providers.runtime.shell import COMMAND_TIMEOUT_S, Result, home_of
from skyhop.providers.ssh.connection import Endpoint, run
from skyhop.providers.ssh.deployment import (
    endpoint_of,
    fetch_inventory,
    load_pools,
    loaded_inventory,
    temporal_at_hand,
    update_pools,
)
from skyhop.providers.ssh.inventory import Host, Inventory
from skyhop.providers.ssh.runtime import SSHNodeRuntime, runtime_dir
from skyhop.providers.ssh.transfer import rsync_to, sftp_to

__all__ = ["PoolNodeRuntime", "SSHProvider", "verdict"]

log = logging.getLogger("skyhop.ssh")


def verdict(inventory: Inventory) -> CheckResult:
    """Enabled while some registered pool has a host that answered its probe."""
    usable = sorted(name for name, hosts in inventory.pools.items() if any(h.facts for h in hosts))
    if not usable:
        return CheckResult(enabled=False, reason="no reachable SSH hosts", hint="skyhop ssh up pools.yaml")
    return CheckResult(enabled=True, reason=f"pools: {', '.join(usable)}")


class SSHProvider(Provider):
    """Registered SSH node pools (``skyhop ssh up``), held in ``SSHPoolsWorkflow``."""

    name = "ssh"
    capabilities = Capabilities(multi_node=True)

    async def load(self) -> None:
        await load_pools()

    def offerings(self) -> list[Offering]:
        offerings: dict[tuple[str, str], Offering] = {}
        for pool, hosts in loaded_inventory().pools.items():
            for host in hosts:
                facts = host.facts
                if facts is None or (pool, facts.shape) in offerings:
                    continue
                offerings[pool, facts.shape] = Offering(
                    provider=self.name,
                    region=pool,
                    instance_type=facts.shape,
                    cpus=float(facts.cpus),
                    memory_gib=facts.memory_gib,
                    accelerators=facts.accelerators,
                    price=0.0,
                )
        return list(offerings.values())

    async def check(self) -> CheckResult:
        return verdict(await fetch_inventory() if temporal_at_hand() else Inventory())

    async def launch(self, request: ProvisionRequest) -> ClusterHandle:
        self.refuse_unsupported(request)
        cluster_name, offering, num_nodes = request.cluster_name, request.offering, request.num_nodes
        # The allocation is recorded before anything is touched: a retried attempt gets these hosts again.
        allocated = await update_pools(
            SSHPoolsUpdate.ALLOCATE,
            AllocateHosts(
                cluster=cluster_name,
                pool=offering.region or "",
                instance_type=offering.instance_type,
                num_nodes=num_nodes,
            ),
            AllocatedHosts,
        )
        hosts = allocated.hosts
        inventory = await fetch_inventory()
        nodes = [_node(cluster_name, rank, host) for rank, host in enumerate(hosts)]
        runtimes = [
            PoolNodeRuntime.resolved(node, host, inventory) for node, host in zip(nodes, hosts, strict=True)
        ]
        try:
            # A host given back by a lost cluster may still hold its folder and jobs: wipe them first.
            await asyncio.gather(*(runtimes[rank].clean() for rank in allocated.fresh))
            await asyncio.gather(*(rt.prepare() for rt in runtimes))
        except NodeUnreachableError as exc:
            raise CapacityError(
                f"ssh pool {offering.region}: a host did not answer ({exc})", "HostUnreachable"
            ) from None
        await update_pools(
            SSHPoolsUpdate.MARK_PREPARED,
            MarkPrepared(cluster=cluster_name, host_ids=[h.spec.host_id for h in hosts]),
            type(None),
        )
        return ClusterHandle(cluster_name=cluster_name, offering=offering, nodes=nodes)

    async def terminate(self, handle: ClusterHandle) -> None:
        # Every host the cluster holds, not only handle.nodes: a failed attempt's handle has none.
        inventory = await fetch_inventory()
        held = inventory.held_by(handle.cluster_name)
        results = await asyncio.gather(
            *(
                PoolNodeRuntime.resolved(_node(handle.cluster_name, rank, host), host, inventory).clean()
                for rank, host in held.items()
            ),
            return_exceptions=True,
        )
        for (rank, host), result in zip(held.items(), results, strict=True):
            if isinstance(result, NodeUnreachableError):
                # A lost node must not keep its host captive: the next cluster's provision wipes it.
                log.warning(
                    "node %d of %s (%s) not cleaned: %s", rank, handle.cluster_name, host.spec.address, result
                )
            elif isinstance(result, BaseException):
                raise result
        await update_pools(SSHPoolsUpdate.RELEASE, ReleaseHosts(cluster=handle.cluster_name), type(None))

    def runtime(self, node: NodeHandle) -> PoolNodeRuntime:
        return PoolNodeRuntime(node)


class PoolNodeRuntime(SSHNodeRuntime):
    """A pool host's runtime: its login (key, pinned host key, rsync or not) is looked up in the
    pools on first use, since ``Provider.runtime`` is synchronous and the pools are in Temporal."""

    def __init__(self, node: NodeHandle) -> None:
        access = node.access
        user = access.user if isinstance(access, SshAccess) and access.user else "?"
        port = access.port if isinstance(access, SshAccess) else 22
        super().__init__(
            node, Endpoint(address=node.ip, port=port, user=user), home_of(node), has_rsync=False
        )
        self._resolved = False

    @classmethod
    def resolved(cls, node: NodeHandle, host: Host, inventory: Inventory) -> PoolNodeRuntime:
        """The runtime of a host already looked up."""
        runtime = cls(node)
        runtime._use(host, inventory)
        return runtime

    def _use(self, host: Host, inventory: Inventory) -> None:
        self.endpoint = endpoint_of(host, inventory)
        self.has_rsync = host.facts is not None and host.facts.rsync
        self._resolved = True

    async def login(self) -> Endpoint:
        """The endpoint, looked up in the pools the first time."""
        if not self._resolved:
            inventory = await fetch_inventory(recent=True)
            host = inventory.host(self.node.instance_id)
            if host is None:  # registered since that answer, perhaps: ask again
                inventory = await fetch_inventory()
                host = inventory.host(self.node.instance_id)
            if host is None:
                raise NodeUnreachableError(
                    f"host {self.node.instance_id} is no longer registered (skyhop ssh status)"
                )
            self._use(host, inventory)
        return self.endpoint

    async def run(
        self, command: str, *, input: bytes | None = None, timeout: float = COMMAND_TIMEOUT_S
    ) -> Result:
        return await run(await self.login(), command, input=input, timeout=timeout)

    async def copy(self, local_path: str, remote: str) -> None:
        endpoint = await self.login()
        if self.has_rsync:
            await rsync_to(endpoint, local_path, remote)
        else:
            await sftp_to(endpoint, local_path, remote)


def _node(cluster_name: str, rank: int, host: Host) -> NodeHandle:
    assert host.facts is not None
    return NodeHandle(
        rank=rank,
        instance_id=host.spec.host_id,
        ip=host.spec.address,
        runtime_dir=runtime_dir(host.facts.home, cluster_name, rank),
        access=SshAccess(user=host.spec.user, port=host.spec.port),
    )
