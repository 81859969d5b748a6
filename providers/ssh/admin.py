"""Registering, listing and removing pools: what ``skyhop ssh up|status|down`` do.

A host held by a cluster is never dropped from under it: re-registering a pool without it, or
removing its pool, is refused until the cluster is taken down.
"""

from __future__ import annotations

import asyncio

from pydantic import BaseModel

from skyhop.providers.runtime.errors import NodeUnreachableError
from skyhop.providers.ssh.connection import run
from skyhop.providers.ssh.inventory import Host, Inventory, read_inventory, updating
from skyhop.providers.ssh.pools import HostSpec, PoolsError
from skyhop.providers.ssh.probe import probe_hosts
from skyhop.providers.ssh.provider import SSHProvider, endpoint_of, verdict

__all__ = ["HostStatus", "pool_status", "register_pools", "remove_pools"]

_STATUS_TIMEOUT_S = 5.0


class HostStatus(BaseModel):
    """One row of ``skyhop ssh status``."""

    pool: str
    host: str
    user: str
    reachable: bool
    error: str | None = None
    cpus: int | None = None
    memory_gib: float | None = None
    accelerators: dict[str, float] = {}
    cluster: str | None = None
    rank: int | None = None


async def register_pools(pools: dict[str, list[HostSpec]]) -> list[Host]:
    """Probe every host of ``pools`` and (re)register those pools; the probed hosts in order."""
    _refuse_dropping_held(read_inventory(), pools)
    hosts = await probe_hosts([spec for specs in pools.values() for spec in specs])
    with updating() as inventory:
        _refuse_dropping_held(inventory, pools)
        for name, specs in pools.items():
            ids = {spec.host_id for spec in specs}
            inventory.pools[name] = [host for host in hosts if host.spec.host_id in ids]
    _record_enabled(read_inventory())
    return hosts


def remove_pools(names: list[str]) -> None:
    """Forget pools; refused (nothing removed) if one is unknown or a cluster holds one of its hosts."""
    with updating() as inventory:
        for name in names:
            if name not in inventory.pools:
                known = ", ".join(sorted(inventory.pools)) or "none (register one with: skyhop ssh up)"
                raise PoolsError(f"no ssh pool named {name!r}; registered pools: {known}")
            _refuse_dropping_held(inventory, {name: []})
        for name in names:
            del inventory.pools[name]
    _record_enabled(read_inventory())


async def pool_status(live: bool = True) -> list[HostStatus]:
    """Every registered host: reachable now (or at its last probe), its size, who holds it."""
    inventory = read_inventory()
    hosts = [host for pool in inventory.pools.values() for host in pool]
    errors = await asyncio.gather(*(_reach(h) for h in hosts)) if live else [h.error for h in hosts]
    rows = []
    for host, error in zip(hosts, errors, strict=True):
        held = inventory.allocations.get(host.spec.host_id)
        facts = host.facts
        error = error or (None if facts else host.error)
        rows.append(
            HostStatus(
                pool=host.spec.pool,
                host=f"{host.spec.address}:{host.spec.port}",
                user=host.spec.user,
                reachable=error is None,
                error=error,
                cpus=facts.cpus if facts else None,
                memory_gib=facts.memory_gib if facts else None,
                accelerators=facts.accelerators if facts else {},
                cluster=held.cluster if held else None,
                rank=held.rank if held else None,
            )
        )
    return rows


async def _reach(host: Host) -> str | None:
    try:
        result = await asyncio.wait_for(run(endpoint_of(host), "true"), _STATUS_TIMEOUT_S)
    except TimeoutError:
        return f"no answer within {_STATUS_TIMEOUT_S:g}s"
    except NodeUnreachableError as exc:
        return str(exc).split(": ", 1)[-1]
    return None if result.exit_status == 0 else result.error_text()


def _refuse_dropping_held(inventory: Inventory, pools: dict[str, list[HostSpec]]) -> None:
    for name, specs in pools.items():
        keep = {spec.host_id for spec in specs}
        for host in inventory.pools.get(name, []):
            held = inventory.allocations.get(host.spec.host_id)
            if held is not None and host.spec.host_id not in keep:
                raise PoolsError(
                    f"{name}: host {host.spec.address}:{host.spec.port} is held by cluster {held.cluster!r}; "
                    f"take it down first (skyhop down {held.cluster})"
                )


def _record_enabled(inventory: Inventory) -> None:
    """Let the optimizer consider ssh exactly while some pool has a host that answered."""
    from skyhop.providers.registry import read_checks, write_checks

    checks = read_checks()
    checks[SSHProvider.name] = verdict(inventory)
    write_checks(checks)
