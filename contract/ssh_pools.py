"""The deployment's SSH pools: ``SSHPoolsWorkflow`` (id ``ssh-pools``), its updates and query.

One entity workflow holds every registered pool, its hosts' probed facts and keys, and which
cluster holds which host (``providers.ssh.inventory.Inventory``). ``skyhop ssh up|down`` register
and remove pools through it; provision and terminate activities, on any worker, allocate and
release hosts through it. Clients reach it with update-with-start, so the first one creates it.
A refused update fails with an ``ApplicationError`` whose type is one of ``SSHPoolsError``.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, Field

from skyhop.providers.ssh.inventory import Host, Inventory

__all__ = [
    "SSH_POOLS_ID",
    "AllocateHosts",
    "AllocatedHosts",
    "MarkPrepared",
    "RegisterPools",
    "ReleaseHosts",
    "RemovePools",
    "SSHPoolsError",
    "SSHPoolsInput",
    "SSHPoolsQuery",
    "SSHPoolsUpdate",
]

SSH_POOLS_ID = "ssh-pools"


class SSHPoolsUpdate(StrEnum):
    REGISTER = "register"
    """``RegisterPools`` -> ``Inventory`` (as it is after)."""
    REMOVE = "remove"
    """``RemovePools`` -> ``Inventory`` (as it is after)."""
    ALLOCATE = "allocate"
    """``AllocateHosts`` -> ``AllocatedHosts``."""
    MARK_PREPARED = "mark_prepared"
    """``MarkPrepared`` -> None."""
    RELEASE = "release"
    """``ReleaseHosts`` -> None."""


class SSHPoolsQuery(StrEnum):
    INVENTORY = "inventory"
    """The ``Inventory``."""


class SSHPoolsError(StrEnum):
    """Why an update was refused (the ``ApplicationError`` type; its message says what to do)."""

    POOLS = "PoolsError"
    """A pool is unknown, or a change would drop a host a cluster holds."""
    POOL_NOT_FOUND = "PoolNotFound"
    NOT_ENOUGH_HOSTS = "NotEnoughHosts"


class RegisterPools(BaseModel):
    pools: dict[str, list[Host]]
    """Each pool's hosts as ``ssh up`` probed them; replaces those pools, leaves the others."""
    identities: dict[str, str] = {}
    """The contents of the identity files the hosts name, by digest (``Host.identity``)."""


class RemovePools(BaseModel):
    names: list[str]


class AllocateHosts(BaseModel):
    cluster: str
    pool: str
    instance_type: str
    num_nodes: int = Field(ge=1)


class AllocatedHosts(BaseModel):
    hosts: list[Host]
    """By rank; the same hosts again for a cluster that holds them already."""
    fresh: list[int]
    """The ranks whose hosts have not been prepared for this cluster yet (to wipe first)."""


class MarkPrepared(BaseModel):
    cluster: str
    host_ids: list[str]


class ReleaseHosts(BaseModel):
    cluster: str


class SSHPoolsInput(BaseModel):
    """Empty to begin with, then what a continue-as-new carries."""

    inventory: Inventory = Inventory()
    history_limit: int | None = None
    """Continue as new once the history has this many events (tests force a small one)."""
