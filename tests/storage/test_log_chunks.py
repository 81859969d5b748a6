"""Logs through the store: chunks in order, each byte once, the end marker last; on a folder and on moto's S3.

The node is a runtime whose log the test grows; the shipper is the one the watchers use, inside
a real activity environment (it heartbeats). A retried activity is a new shipper on the same stream.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.testing import ActivityEnvironment

from skyhop.activities.log_ship import LogShipper
from skyhop.activities.node_jobs import LOG_POLL_S, POLL_MAX_S, PollPace
from skyhop.providers.base import NodeRuntime
from skyhop.providers.runtime.errors import NodeUnreachableError
from skyhop.storage.content import ContentStore, open_store
from skyhop.storage.logs import END, LogReader, chunk_key, rank_folder
from tests.conftest import run


class _Node:
    """A node runtime whose job log is ``text``, read at most ``most`` bytes a call."""

    def __init__(self, most: int = 4) -> None:
        self.text = b""
        self.most = most
        self.reads: list[int] = []
        self.down = False

    async def read_log(self, key: str, offset: int, limit: int = 1 << 20) -> bytes:
        if self.down:
            raise NodeUnreachableError("node", "down")
        self.reads.append(offset)
        return self.text[offset : offset + min(limit, self.most)]


@pytest.fixture(params=["folder", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ContentStore]:
    if request.param == "folder":
        yield open_store((tmp_path / "store").as_uri())
        return
    s3 = request.getfixturevalue("s3")
    bucket = f"logs-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)  # type: ignore[attr-defined]
    yield open_store(f"s3://{bucket}/team")


def _shipper(store: ContentStore, stream: str, *nodes: _Node) -> LogShipper:
    runtimes: list[NodeRuntime] = list(nodes)  # type: ignore[arg-type]
    return LogShipper(store, stream, "job-1", runtimes)


def _in_activity(work: object) -> int:
    async def call() -> int:
        return await work  # type: ignore[no-any-return,misc]

    return run(ActivityEnvironment().run(call))


def _chunks(store: ContentStore, stream: str, rank: int = 0) -> list[tuple[str, int]]:
    folder = rank_folder(stream, rank)
    return [(key.removeprefix(folder), size) for key, size in store.list(folder)]


def test_a_running_jobs_output_is_shipped_a_bounded_amount_a_poll(store: ContentStore) -> None:
    node = _Node()
    node.text = b"x" * 10
    assert _in_activity(_shipper(store, "s", node).ship(6)) == 8  # two reads of four
    assert _chunks(store, "s") == [("0000000000000000", 4), ("0000000000000004", 4)]
    assert _in_activity(_shipper(store, "s", node).ship(None)) == 2


def test_a_retried_shipper_goes_on_where_the_store_ends_and_writes_no_chunk_twice(
    store: ContentStore,
) -> None:
    node = _Node(most=100)
    node.text = b"hello world\n"
    reader = LogReader(store, "j", 0)
    _in_activity(_shipper(store, "j", node).ship())
    assert reader.read() == b"hello world\n"
    assert _in_activity(_shipper(store, "j", node).ship()) == 0  # a retried watcher: nothing new
    node.text += b"more\n"
    retried = _shipper(store, "j", node)
    _in_activity(retried.ship())
    assert node.reads == [0, 12, 12, 12, 17]  # each shipper listed the store first: no byte read twice
    assert _chunks(store, "j") == [("0000000000000000", 12), ("0000000000000012", 5)]
    assert reader.read() == b"more\n" and not reader.ended
    _in_activity(retried.finish())
    assert reader.read() == b"" and reader.ended
    assert _chunks(store, "j")[-1] == (END, 0)
    assert _in_activity(_shipper(store, "j", node).finish()) == 0  # after the end, a retry ships nothing
    assert LogReader(store, "j", 0).read() == b"hello world\nmore\n"


def test_ranks_have_their_own_chunks_and_the_end_comes_after_a_lost_nodes_last_bytes(
    store: ContentStore,
) -> None:
    head, lost = _Node(most=3), _Node(most=3)
    head.text, lost.text = b"rank0\n", b"rank1 partial"
    shipper = _shipper(store, "m", head, lost)
    _in_activity(shipper.ship(3))
    lost.down = True
    head.text += b"end0\n"
    _in_activity(shipper.finish())
    assert LogReader(store, "m", 0).read() == b"rank0\nend0\n"
    rank1 = LogReader(store, "m", 1)
    assert rank1.read() == b"ran" and rank1.ended  # what was shipped before the node was lost


def test_a_reader_follows_chunks_as_they_come_in_offset_order_past_ten_digits_of_names(
    store: ContentStore,
) -> None:
    reader = LogReader(store, "o", 0)
    assert reader.read() == b"" and not reader.ended  # nothing yet: no error
    store.put_bytes(chunk_key("o", 0, 0), b"a" * 9)
    store.put_bytes(chunk_key("o", 0, 9), b"b")
    store.put_bytes(chunk_key("o", 0, 10), b"c" * 90)
    store.put_bytes(chunk_key("o", 0, 100), b"d\n")
    assert reader.read() == b"a" * 9 + b"b" + b"c" * 90 + b"d\n"
    store.put_bytes(rank_folder("o", 0) + END, b"")
    assert reader.read() == b"" and reader.ended


def test_two_writers_at_once_overlap_yet_the_reader_prints_each_byte_once(store: ContentStore) -> None:
    reader = LogReader(store, "w", 0)
    store.put_bytes(chunk_key("w", 0, 0), b"0123")  # the old activity, still running
    assert reader.read() == b"0123"
    store.put_bytes(chunk_key("w", 0, 0), b"012345")  # the retry read more at the same offset
    store.put_bytes(chunk_key("w", 0, 6), b"67")
    assert reader.read() == b"4567"  # the grown chunk is read again from where the reader was
    store.put_bytes(chunk_key("w", 0, 4), b"456789")  # the old one goes on
    store.put_bytes(chunk_key("w", 0, 10), b"ab")
    assert reader.read() == b"89ab"
    assert LogReader(store, "w", 0).read() == b"0123456789ab"


def test_a_watcher_polls_often_while_a_job_writes_and_backs_off_once_it_is_quiet() -> None:
    pace = PollPace()
    start = [pace.next(0) for _ in range(4)]
    assert start == [0.1, 0.2, 0.2, 0.2]  # a job's start: output may come any moment
    assert max(pace.next(0) for _ in range(6)) == LOG_POLL_S  # ten quiet polls keep the short wait
    assert [pace.next(0) for _ in range(3)] == [0.4, 0.8, POLL_MAX_S]
    assert pace.next(100) == LOG_POLL_S  # output again: the next poll is soon
