"""Shipping a job's log from its nodes to the content store (``storage.logs``), from a worker.

What watches a job already asks its nodes every poll (a cluster's ``watch_jobs``, a watch hub's
cycle, setup's ``wait_on_nodes``); it ships each rank's new bytes in the same poll, and, once the
job has ended, the rest and the end markers. So the log's latency is the watcher's poll, and a node
that vanishes (preempted) takes at most the last poll's bytes with it.

A shipper learns where its rank's log ends in the store from one LIST when it first ships: a
retried activity (on another worker, say) goes on from there and never writes a chunk twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence

from skyhop.activities.node_jobs import CALL_TIMEOUT_S
from skyhop.providers.base import NodeRuntime
from skyhop.providers.runtime.errors import NodeUnreachableError
from skyhop.storage.content import ContentStore
from skyhop.storage.errors import StorageError
from skyhop.storage.logs import END, chunk_key, rank_folder

__all__ = ["SHIP_PER_POLL", "LogShipper"]

SHIP_PER_POLL = 8 << 20
"""Most bytes of one rank's output a poll ships while the job runs: a job that writes faster than
this is read cannot hold back the news of its end."""

_log = logging.getLogger(__name__)


class _Rank:
    def __init__(self, store: ContentStore, stream: str, rank: int, runtime: NodeRuntime) -> None:
        self.store, self.stream, self.rank, self.runtime = store, stream, rank, runtime
        self.offset: int | None = None
        """Where the store's copy ends; None until listed."""
        self.ended = False

    def _resume(self) -> None:
        folder = rank_folder(self.stream, self.rank)
        self.offset = 0
        for key, size in self.store.list(folder):
            name = key.removeprefix(folder)
            if name == END:
                self.ended = True
            elif name.isdigit():
                self.offset = max(self.offset, int(name) + size)

    async def ship(self, key: str, limit: int | None, beat: Callable[[], None]) -> int:
        if self.offset is None:
            await asyncio.to_thread(self._resume)
        assert self.offset is not None
        shipped = 0
        while not self.ended and (limit is None or shipped < limit):
            async with asyncio.timeout(CALL_TIMEOUT_S):
                chunk = await self.runtime.read_log(key, self.offset)
            if not chunk:
                break
            await asyncio.to_thread(
                self.store.put_bytes, chunk_key(self.stream, self.rank, self.offset), chunk
            )
            self.offset += len(chunk)
            shipped += len(chunk)
            beat()
        return shipped

    async def end(self) -> None:
        if not self.ended:
            await asyncio.to_thread(self.store.put_bytes, rank_folder(self.stream, self.rank) + END, b"")
            self.ended = True


class LogShipper:
    """Ships one node job's log (node key ``key``) of each given rank to the stream ``stream``."""

    def __init__(
        self,
        store: ContentStore,
        stream: str,
        key: str,
        runtimes: Sequence[NodeRuntime],
        *,
        beat: Callable[[], None] = lambda: None,
    ) -> None:
        self.key = key
        self.ranks = [_Rank(store, stream, rank, runtime) for rank, runtime in enumerate(runtimes)]
        self.beat = beat
        """Called after each chunk (an activity's heartbeat: a big backlog takes a while)."""

    async def ship(self, limit: int | None = SHIP_PER_POLL) -> int:
        """Ship each rank's new bytes (``limit`` at most a rank); how many were shipped.

        A node that does not answer, or a store that fails, costs this poll's bytes only: the next
        poll ships them, and what follows the job (its end above all) is never held up by its log.
        """
        if len(self.ranks) == 1:  # most jobs, and every watch hub run: no task per call
            return await self._ship(self.ranks[0], limit)
        shipped = await asyncio.gather(*(self._ship(rank, limit) for rank in self.ranks))
        return sum(shipped)

    async def finish(self) -> int:
        """Ship each rank's rest and then its end marker: the job has ended (a lost node's rank
        ends with what was shipped). The bytes shipped."""
        shipped = await self.ship(None)
        for rank in self.ranks:
            with contextlib.suppress(StorageError, OSError):
                await rank.end()
        return shipped

    async def _ship(self, rank: _Rank, limit: int | None) -> int:
        try:
            return await rank.ship(self.key, limit, self.beat)
        except (NodeUnreachableError, TimeoutError):
            return 0
        except (StorageError, OSError) as exc:
            _log.warning("shipping %s's log to the store failed: %s", self.key, exc)
            return 0
