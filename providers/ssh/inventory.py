"""The registered pools, what each host has, and which cluster holds it: ``~/.skyhop/ssh/``.

``inventory.json`` is the SSH provider's "cloud": ``ssh up`` writes hosts and their probed
facts, ``provision`` and ``terminate`` write allocations. Every change is a read-modify-write
under an exclusive ``flock``, so concurrent activities (and the CLI) never hand one host to two
clusters. ``known_hosts`` pins each host's key as first seen by ``ssh up``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel

from skyhop.providers.home import skyhop_home
from skyhop.providers.ssh.pools import HostSpec

__all__ = ["Allocation", "Host", "HostFacts", "Inventory", "known_hosts_path", "read_inventory", "updating"]


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


def _folder() -> Path:
    return skyhop_home() / "ssh"


def known_hosts_path() -> Path:
    """OpenSSH ``known_hosts`` of every registered host (asyncssh and rsync's ssh both use it)."""
    return _folder() / "known_hosts"


def read_inventory() -> Inventory:
    """The current inventory (empty before the first ``ssh up``)."""
    try:
        return Inventory.model_validate_json((_folder() / "inventory.json").read_text())
    except FileNotFoundError:
        return Inventory()


@contextlib.contextmanager
def updating() -> Iterator[Inventory]:
    """The inventory under an exclusive lock; saved atomically when the block ends without error."""
    folder = _folder()
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "inventory.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        inventory = read_inventory()
        yield inventory
        path = folder / "inventory.json"
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(inventory.model_dump_json(indent=2))
        os.replace(tmp, path)
        lines = {h.known_hosts_line for hosts in inventory.pools.values() for h in hosts} - {None}
        tmp = known_hosts_path().with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text("".join(f"{line}\n" for line in sorted(line for line in lines if line)))
        os.replace(tmp, known_hosts_path())
