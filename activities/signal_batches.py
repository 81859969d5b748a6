"""``SignalBatches``: what many activities of one worker process send to one workflow, one signal
at a time.

The server takes the signals to one workflow one at a time: a thousand jobs cancelled at once sent
two thousand signals to their job index shard, which took longer than the cancels themselves.
While a signal to a target is on its way, the items sent meanwhile wait, and the next signal
carries them all (at most ``most`` each). Each sender returns once its item's signal landed, or
raises its error (its activity is retried).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:
    from temporalio.client import Client

__all__ = ["SignalBatches"]

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


class SignalBatches(Generic[K, T]):
    """The items waiting for their target's signal, by client and target, each with its sender's future."""

    def __init__(self, signal: Callable[[Client, K, list[T]], Awaitable[None]], most: int) -> None:
        self._signal = signal
        self._most = most
        self._waiting: dict[tuple[int, K], list[tuple[T, asyncio.Future[None]]]] = {}
        self._senders: dict[tuple[int, K], asyncio.Task[None]] = {}

    async def send(self, client: Client, target: K, item: T) -> None:
        key = (id(client), target)
        landed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(key, []).append((item, landed))
        if key not in self._senders:
            self._senders[key] = asyncio.create_task(self._drain(client, key))
        await landed

    async def _drain(self, client: Client, key: tuple[int, K]) -> None:
        """Send what waits for the target, a signal at a time, until nothing does."""
        try:
            while waiting := self._waiting.pop(key, []):
                batch, rest = waiting[: self._most], waiting[self._most :]
                if rest:
                    self._waiting[key] = rest  # nothing was added since the pop: no await between
                try:
                    await self._signal(client, key[1], [item for item, _ in batch])
                except Exception as exc:
                    _settle(batch, exc)
                else:
                    _settle(batch, None)
        finally:
            del self._senders[key]


def _settle(batch: list[tuple[T, asyncio.Future[None]]], error: Exception | None) -> None:
    for _, landed in batch:
        if landed.done():
            continue  # its activity was cancelled meanwhile
        if error is None:
            landed.set_result(None)
        else:
            landed.set_exception(error)
