"""The ``ssh`` provider: hosts the user owns, in named pools, each held by one cluster at a time.

A pool is a region (``--infra ssh/<pool>``) and each distinct host shape in it (CPUs, memory,
GPUs) is an offering at price 0. Provisioning takes free hosts of that shape exclusively (the
allocation is recorded before anything is touched, so a retry reuses the same hosts), wipes what
an earlier cluster may have left in the node's runtime folder, and installs the node runner.
Terminating stops the cluster's jobs, removes its folders and gives the hosts back.
"""

from __future__ import annotations

import asyncio
import logging

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
from skyhop.providers.runtime.shell import home_of
from skyhop.providers.ssh.connection import Endpoint
from skyhop.providers.ssh.inventory import (
    Allocation,
    Host,
    Inventory,
    known_hosts_path,
    read_inventory,
    updating,
)
from skyhop.providers.ssh.runtime import SSHNodeRuntime, runtime_dir

__all__ = ["SSHProvider", "endpoint_of", "verdict"]

log = logging.getLogger("skyhop.ssh")


def endpoint_of(host: Host) -> Endpoint:
    """How to log in to a registered host (its key pinned once ``ssh up`` has seen it)."""
    spec = host.spec
    known = str(known_hosts_path()) if host.host_key else None
    return Endpoint(
        address=spec.address,
        port=spec.port,
        user=spec.user,
        identity_file=spec.identity_file,
        known_hosts=known,
    )


def verdict(inventory: Inventory) -> CheckResult:
    """Enabled while some registered pool has a host that answered its probe."""
    usable = sorted(name for name, hosts in inventory.pools.items() if any(h.facts for h in hosts))
    if not usable:
        return CheckResult(enabled=False, reason="no reachable SSH hosts", hint="skyhop ssh up pools.yaml")
    return CheckResult(enabled=True, reason=f"pools: {', '.join(usable)}")


class SSHProvider(Provider):
    """Registered SSH node pools (``skyhop ssh up``)."""

    name = "ssh"
    capabilities = Capabilities(multi_node=True)

    def offerings(self) -> list[Offering]:
        offerings: dict[tuple[str, str], Offering] = {}
        for pool, hosts in read_inventory().pools.items():
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
        pools = read_inventory().pools
        if not any(h.facts for hosts in pools.values() for h in hosts):
            return CheckResult(
                enabled=False, reason="no reachable SSH hosts", hint="skyhop ssh up pools.yaml"
            )
        return CheckResult(enabled=True, reason=f"pools: {', '.join(sorted(pools))}")

    async def launch(self, request: ProvisionRequest) -> ClusterHandle:
        self.refuse_unsupported(request)
        cluster_name, offering, num_nodes = request.cluster_name, request.offering, request.num_nodes
        with updating() as inventory:
            hosts = _allocate(inventory, cluster_name, offering, num_nodes)
            fresh = [r for r, h in enumerate(hosts) if not inventory.allocations[h.spec.host_id].prepared]
        nodes = [_node(cluster_name, rank, host) for rank, host in enumerate(hosts)]
        runtimes = [self._runtime(node, host) for node, host in zip(nodes, hosts, strict=True)]
        try:
            # A host given back by a lost cluster may still hold its folder and jobs: wipe them first.
            await asyncio.gather(*(runtimes[rank].clean() for rank in fresh))
            await asyncio.gather(*(rt.prepare() for rt in runtimes))
        except NodeUnreachableError as exc:
            raise CapacityError(
                f"ssh pool {offering.region}: a host did not answer ({exc})", "HostUnreachable"
            ) from None
        with updating() as inventory:
            for host in hosts:
                allocation = inventory.allocations.get(host.spec.host_id)
                if allocation is not None and allocation.cluster == cluster_name:
                    allocation.prepared = True
        return ClusterHandle(cluster_name=cluster_name, offering=offering, nodes=nodes)

    async def terminate(self, handle: ClusterHandle) -> None:
        # Every host the cluster holds, not only handle.nodes: a failed attempt's handle has none.
        held = read_inventory().held_by(handle.cluster_name)
        results = await asyncio.gather(
            *(
                self._runtime(_node(handle.cluster_name, rank, host), host).clean()
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
        with updating() as inventory:
            for host_id, allocation in list(inventory.allocations.items()):
                if allocation.cluster == handle.cluster_name:
                    del inventory.allocations[host_id]

    def runtime(self, node: NodeHandle) -> SSHNodeRuntime:
        host = read_inventory().host(node.instance_id)
        if host is None:
            raise NodeUnreachableError(f"host {node.instance_id} is no longer registered (skyhop ssh status)")
        return self._runtime(node, host)

    def _runtime(self, node: NodeHandle, host: Host) -> SSHNodeRuntime:
        facts = host.facts
        home = facts.home if facts is not None else home_of(node)
        return SSHNodeRuntime(node, endpoint_of(host), home, has_rsync=facts is not None and facts.rsync)


def _node(cluster_name: str, rank: int, host: Host) -> NodeHandle:
    assert host.facts is not None
    return NodeHandle(
        rank=rank,
        instance_id=host.spec.host_id,
        ip=host.spec.address,
        runtime_dir=runtime_dir(host.facts.home, cluster_name, rank),
        access=SshAccess(user=host.spec.user, port=host.spec.port),
    )


def _allocate(inventory: Inventory, cluster_name: str, offering: Offering, num_nodes: int) -> list[Host]:
    """The cluster's hosts by rank: those it holds already, then free hosts of the offering's shape."""
    pool = offering.region or ""
    if pool not in inventory.pools:
        raise CapacityError(f"ssh pool {pool!r} is not registered (skyhop ssh up)", "PoolNotFound")
    held = inventory.held_by(cluster_name)
    free = [
        host
        for host in inventory.pools[pool]
        if host.facts is not None
        and host.facts.shape == offering.instance_type
        and host.spec.host_id not in inventory.allocations
    ]
    missing = [rank for rank in range(num_nodes) if rank not in held]
    if len(free) < len(missing):
        holders = sorted({a.cluster for a in inventory.allocations.values() if a.cluster != cluster_name})
        raise CapacityError(
            f"ssh pool {pool!r} has {len(free)} free host(s) of type {offering.instance_type}, "
            f"{len(missing)} needed" + (f" (others are held by: {', '.join(holders)})" if holders else ""),
            "NotEnoughHosts",
        )
    for rank, host in zip(missing, free, strict=False):
        inventory.allocations[host.spec.host_id] = Allocation(cluster=cluster_name, rank=rank)
        held[rank] = host
    return [held[rank] for rank in range(num_nodes)]
