"""The deployment's SSH pools: each host, what its probe found, and which cluster holds it.

This is the SSH provider's "cloud". It lives in ``SSHPoolsWorkflow`` (``workflows/ssh_pools.py``),
not on a disk, so the CLI that registers pools and every worker that allocates their hosts see
one state whatever machine they run on; the workflow runs one update at a time, which is what
makes an allocation atomic. Plain code (no Temporal, no I/O): the rules are unit-tested directly
and the workflow is a thin wrapper.

Identity files travel as their contents (``identities``, by SHA-256), since a worker on another
machine cannot read the CLI's ``~/.ssh``; skyhop's payload codec encrypts them in history.
"""

from __future__ import annotations

import hashlib

from pydantic import BaseModel

from skyhop.providers.errors import CapacityError
from skyhop.providers.ssh.pools import HostSpec, PoolsError

__all__ = ["Allocation", "Host", "HostFacts", "Inventory", "identity_digest"]


def identity_digest(content: str) -> str:
    """The name an identity file's contents go by in the inventory (and on a worker's disk)."""
    return hashlib.sha256(content.encode()).hexdigest()


class HostFacts(BaseModel):
    """What a probe found on a host."""

    hostname: str
    home: str
    cpus: int
    memory_gib: float
    accelerators: dict[str, float] = {}
    rsync: bool
    """Whether ``rsync`` is installed there (else files go over SFTP)."""

    @property
    def shape(self) -> str:
        """The host's instance type name, e.g. ``8CPU--31.3GB--A100:2`` (hosts alike share it)."""
        gpus = "".join(f"--{name}:{count:g}" for name, count in sorted(self.accelerators.items()))
        return f"{self.cpus}CPU--{self.memory_gib:g}GB{gpus}"


class Host(BaseModel):
    """A registered host and its last probe: facts when it answered, else the error."""

    spec: HostSpec
    facts: HostFacts | None = None
    error: str | None = None
    host_key: str | None = None
    """``<type> <base64>`` as first seen by ``ssh up``; later connections require it."""
    identity: str | None = None
    """The digest of its identity file's contents in ``Inventory.identities`` (None: no key given)."""

    @property
    def known_hosts_line(self) -> str | None:
        """This host's ``known_hosts`` entry."""
        if self.host_key is None:
            return None
        spec = self.spec
        name = spec.address if spec.port == 22 else f"[{spec.address}]:{spec.port}"
        return f"{name} {self.host_key}"


class Allocation(BaseModel):
    """A host held by a cluster as node ``rank``."""

    cluster: str
    rank: int
    prepared: bool = False
    """Whether the node's runtime folder has been cleaned and the runner installed."""


class Inventory(BaseModel):
    pools: dict[str, list[Host]] = {}
    allocations: dict[str, Allocation] = {}
    """By ``HostSpec.host_id``."""
    identities: dict[str, str] = {}
    """Identity file contents by ``identity_digest``: only those some registered host uses."""

    def host(self, host_id: str) -> Host | None:
        """The registered host with this id."""
        pool = host_id.split("/", 1)[0]
        return next((h for h in self.pools.get(pool, []) if h.spec.host_id == host_id), None)

    def held_by(self, cluster: str) -> dict[int, Host]:
        """The hosts a cluster holds, by rank."""
        held = {}
        for host_id, allocation in self.allocations.items():
            host = self.host(host_id)
            if allocation.cluster == cluster and host is not None:
                held[allocation.rank] = host
        return held

    def known_hosts(self) -> str:
        """An OpenSSH ``known_hosts`` file pinning every registered host's key."""
        lines = {h.known_hosts_line for hosts in self.pools.values() for h in hosts}
        return "".join(f"{line}\n" for line in sorted(line for line in lines if line))

    def register(self, pools: dict[str, list[Host]], identities: dict[str, str]) -> None:
        """(Re)register ``pools`` (others stay); refused, changing nothing, if it drops a held host."""
        for name, hosts in pools.items():
            self.refuse_dropping_held(name, {host.spec.host_id for host in hosts})
        self.pools.update(pools)
        self.identities.update(identities)
        self._forget_unused_identities()

    def remove(self, names: list[str]) -> None:
        """Forget pools; refused (nothing removed) if one is unknown or a cluster holds one of its hosts."""
        for name in names:
            if name not in self.pools:
                known = ", ".join(sorted(self.pools)) or "none (register one with: skyhop ssh up)"
                raise PoolsError(f"no ssh pool named {name!r}; registered pools: {known}")
            self.refuse_dropping_held(name, set())
        for name in names:
            del self.pools[name]
        self._forget_unused_identities()

    def refuse_dropping_held(self, pool: str, keep: set[str]) -> None:
        """``PoolsError`` if a host of ``pool`` outside ``keep`` is held by a cluster."""
        for host in self.pools.get(pool, []):
            held = self.allocations.get(host.spec.host_id)
            if held is not None and host.spec.host_id not in keep:
                raise PoolsError(
                    f"{pool}: host {host.spec.address}:{host.spec.port} is held by cluster {held.cluster!r}; "
                    f"take it down first (skyhop down {held.cluster})"
                )

    def allocate(self, cluster: str, pool: str, instance_type: str, num_nodes: int) -> list[Host]:
        """The cluster's hosts by rank: those it holds already, then free hosts of ``instance_type``.

        Idempotent per (cluster, rank): a retried provision gets the hosts it was given before.
        """
        held = self.held_by(cluster)
        for rank, host in self.missing(cluster, pool, instance_type, num_nodes).items():
            self.allocations[host.spec.host_id] = Allocation(cluster=cluster, rank=rank)
            held[rank] = host
        return [held[rank] for rank in range(num_nodes)]

    def missing(self, cluster: str, pool: str, instance_type: str, num_nodes: int) -> dict[int, Host]:
        """The free hosts ``allocate`` would give the cluster, by rank, changing nothing;
        ``CapacityError`` if there are too few (``SSHPoolsWorkflow`` refuses such a request before
        it reaches history)."""
        if pool not in self.pools:
            raise CapacityError(f"ssh pool {pool!r} is not registered (skyhop ssh up)", "PoolNotFound")
        held = self.held_by(cluster)
        free = [
            host
            for host in self.pools[pool]
            if host.facts is not None
            and host.facts.shape == instance_type
            and host.spec.host_id not in self.allocations
        ]
        missing = [rank for rank in range(num_nodes) if rank not in held]
        if len(free) < len(missing):
            holders = sorted({a.cluster for a in self.allocations.values() if a.cluster != cluster})
            raise CapacityError(
                f"ssh pool {pool!r} has {len(free)} free host(s) of type {instance_type}, "
                f"{len(missing)} needed"
                + (f" (others are held by: {', '.join(holders)})" if holders else ""),
                "NotEnoughHosts",
            )
        return dict(zip(missing, free, strict=False))

    def mark_prepared(self, cluster: str, host_ids: list[str]) -> None:
        """The cluster's runtime is installed on these hosts: a retried provision need not wipe them."""
        for host_id in host_ids:
            allocation = self.allocations.get(host_id)
            if allocation is not None and allocation.cluster == cluster:
                allocation.prepared = True

    def release(self, cluster: str) -> None:
        """Give back every host the cluster holds (idempotent)."""
        for host_id, allocation in list(self.allocations.items()):
            if allocation.cluster == cluster:
                del self.allocations[host_id]

    def _forget_unused_identities(self) -> None:
        used = {h.identity for hosts in self.pools.values() for h in hosts}
        self.identities = {digest: key for digest, key in self.identities.items() if digest in used}
