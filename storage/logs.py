"""Job and setup logs in the content store: append-only chunks per rank, then an end marker.

Why through the store: the CLI may run on a laptop that reaches Temporal and the store, never a
node (no node keys, no network path) nor a worker's disk. The workers, which reach the nodes,
ship each log's new bytes (``activities.log_ship``); any client reads them back from here.

Layout under the store's root::

    logs/<stream>/rank-<r>/<offset, 16 digits>   bytes [offset, offset + size) of rank r's log
    logs/<stream>/rank-<r>/end                   written after the rank's last chunk

Why chunks named by their offset: a writer that starts again (a retried activity, on any worker)
lists its rank's folder and goes on from the end of the last chunk, so it never writes a byte twice;
two writers at once (a worker the server gave up on, still running) may write overlapping chunks,
and a reader that slices each chunk from the offset it has reached prints each byte once anyway.
Why ``end`` sorts after every offset: one LIST per rank tells a reader both what is new and whether
that is all, and a LIST that shows ``end`` shows every chunk written before it.
"""

from __future__ import annotations

import functools

from skyhop.storage.content import ContentStore, StoreConfig, load_store_config

__all__ = [
    "END",
    "LogReader",
    "attempt_stream",
    "chunk_key",
    "job_stream",
    "log_store",
    "rank_folder",
    "setup_stream",
]

END = "end"
"""The name of a rank's end marker: it sorts after every chunk (digits)."""
_DIGITS = 16


def job_stream(task_id: str) -> str:
    """A cluster job's stream, named by its task id, which is unique per cluster and job
    (``<time>_<cluster>_<id>``): a cluster brought up again under its name starts at job 1 again."""
    return f"jobs/{task_id}"


def setup_stream(setup_key: str) -> str:
    """A launch's setup output (``contract.setup_key``, unique per launch)."""
    return f"setup/{setup_key}"


def attempt_stream(job_id: int, task_index: int, attempt: int) -> str:
    """A managed job's attempt: each recovery runs on a new cluster, whose job ids start again."""
    return f"managed-jobs/{job_id}/task-{task_index}/attempt-{attempt}"


def rank_folder(stream: str, rank: int) -> str:
    return f"logs/{stream}/rank-{rank}/"


def chunk_key(stream: str, rank: int, offset: int) -> str:
    return f"{rank_folder(stream, rank)}{offset:0{_DIGITS}d}"


def log_store() -> ContentStore:
    """This machine's configured store (``store.url``): the CLI reads logs where the workers write them."""
    return _open(load_store_config())


@functools.lru_cache(maxsize=4)
def _open(config: StoreConfig) -> ContentStore:
    """One store per configuration: an S3 client is slow to make and safe to share among threads."""
    return config.open()


class LogReader:
    """One rank's log from the store, in order, each byte once (blocking calls: run in a thread)."""

    def __init__(self, store: ContentStore, stream: str, rank: int) -> None:
        self.store = store
        self.folder = rank_folder(stream, rank)
        self.offset = 0
        """Bytes of the log read so far."""
        self.after: str | None = None
        """The last chunk read (or passed): the next LIST starts after it."""
        self.ended = False
        """The end marker was seen after every chunk: nothing more will come."""

    def read(self) -> bytes:
        """What was written since the last call (one LIST, plus a GET per new chunk)."""
        parts: list[bytes] = []
        while not self.ended and self._read_listed(parts):
            extra = self._cover()
            if not extra:
                break
            parts.append(extra)
        return b"".join(parts)

    def _read_listed(self, parts: list[bytes]) -> bool:
        """Read the chunks listed after the last one read; True if it stopped at a gap."""
        for key, size in self.store.list(self.folder, self.after):
            name = key.removeprefix(self.folder)
            if name == END:
                self.ended = True
                return False
            if not name.isdigit():
                continue
            start = int(name)
            if start > self.offset:
                return True
            if start + size > self.offset:
                data = self.store.get_bytes(key)
                parts.append(data[self.offset - start :])
                self.offset = max(self.offset, start + len(data))
            self.after = key
        return False

    def _cover(self) -> bytes:
        """The bytes from the reader's offset on, in any chunk that holds them.

        Only while two writers race is there a gap: one wrote a longer chunk at an offset already
        read, or a chunk that starts before the one read last. A LIST of the whole folder finds it.
        """
        for key, size in self.store.list(self.folder):
            name = key.removeprefix(self.folder)
            if name.isdigit() and int(name) <= self.offset < int(name) + size:
                extra = self.store.get_bytes(key)[self.offset - int(name) :]
                self.offset += len(extra)
                return extra
        return b""
