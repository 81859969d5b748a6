"""Services and pools: one long-lived workflow per name (``service:NAME``, ``pool:NAME``), found by a
visibility listing of its kind and read by its ``state`` query. Written once for both."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from temporalio.client import Client

__all__ = ["named_states", "query_state", "running_names"]

T = TypeVar("T")


async def query_state(client: Client, workflow_id: str, query: str, result_type: type[T]) -> T | None:
    """The workflow's answer to ``query``; None when there is no such workflow."""
    from temporalio.service import RPCError

    from skyhop.cli.failures import asked_again, is_not_found

    handle = client.get_workflow_handle(workflow_id)
    try:
        return await asked_again(lambda: handle.query(query, result_type=result_type))
    except RPCError as exc:
        if not is_not_found(exc):
            raise
        return None


async def running_names(client: Client, kind: str) -> list[str]:
    """The names of the running workflows of ``kind`` (their ids are ``kind:NAME``)."""
    listing = f"SkyhopKind = '{kind}' AND ExecutionStatus = 'Running'"
    return sorted([wf.id.removeprefix(f"{kind}:") async for wf in client.list_workflows(listing)])


async def named_states(
    client: Client,
    name: str | None,
    kind: str,
    state_of: Callable[[Client, str], Awaitable[T]],
    missing: type[Exception],
) -> list[T]:
    """``name``'s state, or (None) every running one's; one that ended between the listing and its
    query (``missing``) is left out, while a name asked for raises it."""
    names = [name] if name is not None else await running_names(client, kind)
    found = await asyncio.gather(*(state_of(client, n) for n in names), return_exceptions=True)
    states: list[T] = []
    for result in found:
        if isinstance(result, missing) and name is None:
            continue
        if isinstance(result, BaseException):
            raise result
        states.append(result)
    return states
