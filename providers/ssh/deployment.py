"""Reaching ``SSHPoolsWorkflow`` from a provider call, and turning its state into logins here.

Inside an activity the worker's own client asks (any worker, any machine); outside one the
provider acts for the CLI, whose configuration says where Temporal is. A worker turns what the
workflow holds into files its SSH tools need, under its own ``SKYHOP_HOME``: each identity file
(``ssh/keys/<digest>``, mode 0600) and a ``known_hosts`` named by its contents, so concurrent
activities never write the same file differently and a re-registered key is picked up at once.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
import uuid
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from skyhop.contract.ssh_pools import (
    SSH_POOLS_ID,
    SSHPoolsError,
    SSHPoolsInput,
    SSHPoolsQuery,
    SSHPoolsUpdate,
)
from skyhop.providers.errors import CapacityError
from skyhop.providers.home import skyhop_home
from skyhop.providers.ssh.connection import Endpoint
from skyhop.providers.ssh.inventory import Host, Inventory
from skyhop.providers.ssh.pools import PoolsError

if TYPE_CHECKING:
    from temporalio.client import Client

__all__ = [
    "endpoint_of",
    "fetch_inventory",
    "load_pools",
    "loaded_inventory",
    "pools_client",
    "temporal_at_hand",
    "update_pools",
]

T = TypeVar("T")

_FRESH_S = 5.0
"""How long a fetched inventory answers ``fetch_inventory(recent=True)``: the node runtimes an
activity builds share one query instead of one each."""

_IN_FLIGHT = 8
"""Updates one process sends at once. The server takes 10 in flight per workflow and refuses the
rest; a burst of refused updates sent again and again (50 provisions at once) kept the workflow's
tasks from completing for minutes, while 8 at a time are answered in one workflow task."""

_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Client] = weakref.WeakKeyDictionary()
_senders: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
    weakref.WeakKeyDictionary()
)
_recent: tuple[float, Inventory] | None = None
_loaded = Inventory()


async def pools_client() -> Client:
    """The worker's client inside an activity; else the CLI's (one per event loop)."""
    from temporalio import activity

    if activity.in_activity():
        return activity.client()
    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None:
        from skyhop.cli.session import open_client

        client = _clients[loop] = await open_client()
    return client


def temporal_at_hand() -> bool:
    """Whether a client can be had without starting the embedded server (``skyhop check`` must
    not start one just to find that no pool was ever registered)."""
    from temporalio import activity

    if activity.in_activity():
        return True
    from skyhop.cli.config import load_config
    from skyhop.cli.embedded import read_state, server_running

    state = read_state()
    return load_config().address is not None or (state is not None and server_running(state))


async def fetch_inventory(*, recent: bool = False) -> Inventory:
    """The deployment's pools (empty before the first ``ssh up``); ``recent`` accepts one a few
    seconds old."""
    global _recent
    if recent and _recent is not None and time.monotonic() - _recent[0] < _FRESH_S:
        return _recent[1]
    from temporalio.service import RPCError, RPCStatusCode

    from skyhop.cli.failures import asked_again

    client = await pools_client()

    async def ask() -> Inventory:
        answer: Inventory = await client.get_workflow_handle(SSH_POOLS_ID).query(
            SSHPoolsQuery.INVENTORY, result_type=Inventory
        )
        return answer

    try:
        # The worker refuses a query between workflow tasks, and the server one beyond its load.
        inventory = await asked_again(ask)
    except RPCError as exc:
        if exc.status != RPCStatusCode.NOT_FOUND:
            raise
        inventory = Inventory()
    _recent = (time.monotonic(), inventory)
    return inventory


async def load_pools() -> None:
    """Fetch the pools for ``loaded_inventory`` (the optimizer reads offerings synchronously); none
    where no Temporal is at hand (a dry run starts no server)."""
    global _loaded
    _loaded = await fetch_inventory() if temporal_at_hand() else Inventory()


def loaded_inventory() -> Inventory:
    """The inventory the last ``load_pools`` fetched in this process."""
    return _loaded


async def update_pools(update: SSHPoolsUpdate, request: Any, result_type: type[T]) -> T:
    """Send an update, starting the workflow if this is the first; a refusal is raised as the
    provider's own error (``PoolsError``, ``CapacityError``) with the workflow's message."""
    global _recent
    from temporalio.client import WithStartWorkflowOperation, WorkflowUpdateFailedError
    from temporalio.common import WorkflowIDConflictPolicy
    from temporalio.exceptions import ApplicationError
    from temporalio.service import RPCError, RPCStatusCode

    from skyhop.cli.failures import while_busy
    from skyhop.contract import WORKFLOW_QUEUE, WorkflowType

    client = await pools_client()
    update_id = str(uuid.uuid4())

    async def send() -> T:
        # The workflow exists but once: a plain update, cheaper than a multi-operation for the
        # server. The same update id each attempt, so one the workflow took answers as it did.
        try:
            sent: T = await client.get_workflow_handle(SSH_POOLS_ID).execute_update(
                update, request, id=update_id, result_type=result_type
            )
            return sent
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise
        start: WithStartWorkflowOperation[Any, None] = WithStartWorkflowOperation(
            WorkflowType.SSH_POOLS,
            SSHPoolsInput(),
            id=SSH_POOLS_ID,
            task_queue=WORKFLOW_QUEUE,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        )
        answer: T = await client.execute_update_with_start_workflow(
            update, request, start_workflow_operation=start, id=update_id, result_type=result_type
        )
        return answer

    senders = _senders.setdefault(asyncio.get_running_loop(), asyncio.Semaphore(_IN_FLIGHT))
    try:
        # Other processes' provisions may still fill the server's in-flight updates: send again.
        async with senders:
            result = await while_busy(send)
    except WorkflowUpdateFailedError as exc:
        cause = exc.cause
        if not isinstance(cause, ApplicationError):
            raise
        if cause.type == SSHPoolsError.POOLS:
            raise PoolsError(cause.message) from None
        if cause.type in (SSHPoolsError.POOL_NOT_FOUND, SSHPoolsError.NOT_ENOUGH_HOSTS):
            raise CapacityError(cause.message, cause.type) from None
        raise
    _recent = None  # what this process last saw is out of date now
    return result


def endpoint_of(host: Host, inventory: Inventory) -> Endpoint:
    """How to log in to a registered host from this machine (its key pinned once ``ssh up`` saw it)."""
    spec = host.spec
    identity = None
    if host.identity is not None and host.identity in inventory.identities:
        identity = _materialized(f"keys/{host.identity}", inventory.identities[host.identity])
    known = inventory.known_hosts()
    known_hosts = None
    if host.host_key is not None:
        known_hosts = _materialized(f"known_hosts-{hashlib.sha256(known.encode()).hexdigest()[:16]}", known)
    return Endpoint(
        address=spec.address,
        port=spec.port,
        user=spec.user,
        identity_file=identity if identity is not None else spec.identity_file,
        known_hosts=known_hosts,
    )


def _materialized(name: str, content: str) -> str:
    """``content`` in a file of this machine's ``SKYHOP_HOME/ssh`` named for it, readable only by us."""
    path = skyhop_home() / "ssh" / name
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(f"{path}.{os.getpid()}.{id(content)}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(content)
        os.replace(tmp, path)
    return str(path)
