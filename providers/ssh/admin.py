"""Registering, listing and removing pools: what ``skyhop ssh up|status|down`` do.

Pools are probed from where the command runs, then kept in ``SSHPoolsWorkflow`` with the contents
of the identity files they name, so every worker can log in to their hosts. A host held by a
cluster is never dropped from under it: re-registering a pool without it, or removing its pool,
is refused until the cluster is taken down (the workflow decides, so no race can slip past).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from pydantic import BaseModel

from skyhop.contract.ssh_pools import RegisterPools, RemovePools, SSHPoolsUpdate
from skyhop.providers.runtime.errors import NodeUnreachableError
from skyhop.providers.ssh.connection import run
from skyhop.providers.ssh.deployment import endpoint_of, fetch_inventory, temporal_at_hand, update_pools
from skyhop.providers.ssh.inventory import Host, Inventory, identity_digest
from skyhop.providers.ssh.pools import HostSpec, PoolsError
from skyhop.providers.ssh.probe import probe_hosts
from skyhop.providers.ssh.provider import SSHProvider, verdict

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
    before = await fetch_inventory()
    for name, specs in pools.items():
        before.refuse_dropping_held(name, {spec.host_id for spec in specs})
    identities = {
        path: _identity(path) for path in {s.identity_file for v in pools.values() for s in v} if path
    }
    probed = await probe_hosts([spec for specs in pools.values() for spec in specs])
    hosts = [
        host.model_copy(update={"identity": identity_digest(identities[host.spec.identity_file])})
        if host.spec.identity_file
        else host
        for host in probed
    ]
    request = RegisterPools(
        pools={name: [h for h in hosts if h.spec.pool == name] for name in pools},
        identities={identity_digest(key): key for key in identities.values()},
    )
    _record_enabled(await update_pools(SSHPoolsUpdate.REGISTER, request, Inventory))
    return hosts


async def remove_pools(names: list[str]) -> None:
    """Forget pools; refused (nothing removed) if one is unknown or a cluster holds one of its hosts."""
    _record_enabled(await update_pools(SSHPoolsUpdate.REMOVE, RemovePools(names=names), Inventory))


async def pool_status(live: bool = True) -> list[HostStatus]:
    """Every registered host: reachable now (or at its last probe), its size, who holds it."""
    # No Temporal running: no pool was ever registered, and looking must not start a server.
    inventory = await fetch_inventory() if temporal_at_hand() else Inventory()
    hosts = [host for pool in inventory.pools.values() for host in pool]
    errors = (
        await asyncio.gather(*(_reach(h, inventory) for h in hosts)) if live else [h.error for h in hosts]
    )
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


async def _reach(host: Host, inventory: Inventory) -> str | None:
    try:
        result = await asyncio.wait_for(run(endpoint_of(host, inventory), "true"), _STATUS_TIMEOUT_S)
    except TimeoutError:
        return f"no answer within {_STATUS_TIMEOUT_S:g}s"
    except NodeUnreachableError as exc:
        return str(exc).split(": ", 1)[-1]
    return None if result.exit_status == 0 else result.error_text()


def _identity(path: str) -> str:
    """An identity file's contents (workers on other machines cannot read the user's)."""
    try:
        return Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise PoolsError(
            f"cannot read identity file {path}: {getattr(exc, 'strerror', None) or exc}"
        ) from None


def _record_enabled(inventory: Inventory) -> None:
    """Let the optimizer consider ssh exactly while some pool has a host that answered."""
    from skyhop.providers.registry import read_checks, write_checks

    checks = read_checks()
    checks[SSHProvider.name] = verdict(inventory)
    write_checks(checks)
