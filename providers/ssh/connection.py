"""Commands on SSH hosts over asyncssh: one reused connection per host, keepalives, timeouts.

Connections are cached per event loop (a worker keeps its connections across activities), at
most ``_CHANNELS`` commands run on one connection at a time (OpenSSH allows 10 sessions per
connection by default), and a connection that keepalives found dead is replaced on next use.
Every failure to get an answer, including a timeout, is a ``NodeUnreachableError``.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from skyhop.providers.runtime.errors import NodeUnreachableError
from skyhop.providers.runtime.shell import COMMAND_TIMEOUT_S, Result

if TYPE_CHECKING:
    import asyncssh

__all__ = ["COMMAND_TIMEOUT_S", "Endpoint", "Result", "close_connections", "connect", "run"]

CONNECT_TIMEOUT_S = 10.0
KEEPALIVE_S = 2.0
KEEPALIVE_COUNT = 3
"""A connection whose keepalives go unanswered this many times in a row is dropped (~6 s)."""
_CHANNELS = 8


class Endpoint(BaseModel):
    """How to log in to one host."""

    model_config = ConfigDict(frozen=True)

    address: str
    port: int = 22
    user: str
    identity_file: str | None = None
    known_hosts: str | None = None
    """An OpenSSH known_hosts file the host key must be in; None accepts any key (first probe)."""

    @property
    def label(self) -> str:
        return f"{self.user}@{self.address}:{self.port}"


class _Slot:
    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.channels = asyncio.Semaphore(_CHANNELS)
        self.conn: asyncssh.SSHClientConnection | None = None


_slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Endpoint, _Slot]] = (
    weakref.WeakKeyDictionary()
)


def _slot(endpoint: Endpoint) -> _Slot:
    per_loop = _slots.setdefault(asyncio.get_running_loop(), {})
    return per_loop.setdefault(endpoint, _Slot())


async def connect(endpoint: Endpoint) -> asyncssh.SSHClientConnection:
    """A live connection to ``endpoint``, reusing this loop's if it is still up."""
    import asyncssh

    slot = _slot(endpoint)
    async with slot.lock:
        if slot.conn is not None and not slot.conn.is_closed():
            return slot.conn
        try:
            slot.conn = await asyncio.wait_for(
                asyncssh.connect(
                    endpoint.address,
                    endpoint.port,
                    username=endpoint.user,
                    client_keys=[endpoint.identity_file] if endpoint.identity_file else (),
                    known_hosts=endpoint.known_hosts,
                    keepalive_interval=KEEPALIVE_S,
                    keepalive_count_max=KEEPALIVE_COUNT,
                    connect_timeout=CONNECT_TIMEOUT_S,
                ),
                CONNECT_TIMEOUT_S + 1,
            )
        except (OSError, asyncssh.Error, TimeoutError) as exc:
            raise NodeUnreachableError(f"{endpoint.label}: {_reason(exc)}") from None
        return slot.conn


async def run(
    endpoint: Endpoint, command: str, *, input: bytes | None = None, timeout: float = COMMAND_TIMEOUT_S
) -> Result:
    """Run ``command`` with the login shell's PATH; its exit status is the caller's to judge."""
    import asyncssh

    conn = await connect(endpoint)
    slot = _slot(endpoint)
    try:
        async with slot.channels:
            done = await asyncio.wait_for(conn.run(command, input=input, encoding=None), timeout)
    except TimeoutError:
        raise NodeUnreachableError(f"{endpoint.label}: no answer within {timeout:g}s") from None
    except (OSError, asyncssh.Error) as exc:
        raise NodeUnreachableError(f"{endpoint.label}: {_reason(exc)}") from None
    status = done.exit_status if done.exit_status is not None else 255
    return Result(exit_status=status, stdout=_bytes(done.stdout), stderr=_bytes(done.stderr))


async def close_connections() -> None:
    """Close this loop's connections (before the loop ends, so nothing is left half-open)."""
    per_loop = _slots.pop(asyncio.get_running_loop(), {})
    for slot in per_loop.values():
        if slot.conn is not None:
            slot.conn.close()
            await slot.conn.wait_closed()


def _bytes(data: object) -> bytes:
    if data is None:
        return b""
    return data if isinstance(data, bytes) else str(data).encode()


def _reason(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "timed out"
    text = str(exc) or type(exc).__name__
    return text[0].lower() + text[1:] if text[:1].isupper() and not text[1:2].isupper() else text
