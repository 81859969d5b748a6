"""A watch hub's cycle over a run on a folder node: what it reads, what it ships, what it misses not."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
import zlib
from pathlib import Path
from typing import Any, cast
from unittest.mock import ANY

import pytest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import ActivityEnvironment

from skyhop.activities import runner_exits
from skyhop.activities.models import (
    AttemptLog,
    FollowedRun,
    FollowRunInput,
    FollowSet,
    ForgetRunInput,
    WatchedJob,
)
from skyhop.activities.runner_exits import RunnerExits
from skyhop.activities.watch_hub import (
    _ASK_HELD_EVERY,
    _HERE,
    _QUIET_SHIP_EVERY,
    Followed,
    _ask,
    _Inbox,
    _owed,
    _refresh,
    follow_run,
    forget_run,
    poll_followed,
    watch_followed,
)
from skyhop.contract import JOB_KEY_PREFIX
from skyhop.contract.watch_hub import RUN_ENDED_SIGNAL, WatchHubQuery, WatchHubSignal, watch_hub_workflow_id
from skyhop.providers.base import ClusterHandle, NodeHandle, Offering
from skyhop.providers.runtime import node_runner
from skyhop.providers.runtime.jobs import JobOutcome, NodeJobStatus
from skyhop.storage.logs import LogReader, attempt_stream, log_store

_JOB = 1


def _node(root: Path) -> Path:
    """A node whose job 1 is RUNNING under a live runner (this process), as ``node_runner`` leaves it."""
    job = Path(node_runner.job_dir(str(root), f"{JOB_KEY_PREFIX}{_JOB}"))
    job.mkdir(parents=True)
    _write_state(job, {"status": "RUNNING", "pid": os.getpid(), "runner_pid": os.getpid()})
    (job / "run.log").write_bytes(b"")
    return job


def _write_state(job: Path, state: dict[str, object]) -> None:
    node_runner._write_json(str(job / "state.json"), {"started_at": time.time(), **state})


def _followed(root: Path, key: str = "managed-job:9001/task-0/attempt-1") -> Followed:
    """A run whose output goes to a stream of its own (tests on other processes share the store)."""
    offering = Offering(provider="local", instance_type="local", cpus=1, memory_gib=1, price=0)
    node = NodeHandle(rank=0, instance_id="i-0", ip="127.0.0.1", runtime_dir=str(root))
    return Followed(
        FollowedRun(
            key=key,
            owner="managed-job:9001",
            handle=ClusterHandle(cluster_name="hub-cycle", offering=offering, nodes=[node]),
            job=WatchedJob(job_id=_JOB, nodes=[0], running=True),
            log=AttemptLog(job_id=zlib.crc32(str(root).encode()), task_index=0, attempt=1),
        )
    )


def _cycle(*runs: Followed) -> dict[str, tuple[FollowedRun, JobOutcome]]:
    """One cycle that holds no runner past its end: each run's nodes are asked."""

    async def once() -> dict[str, tuple[FollowedRun, JobOutcome]]:
        exits = RunnerExits()
        try:
            return await poll_followed(list(runs), exits)
        finally:
            exits.close()

    return asyncio.run(ActivityEnvironment().run(once))


def test_a_quiet_runs_output_is_shipped_within_a_few_cycles_and_all_of_it_by_its_end(tmp_path: Path) -> None:
    job, run = _node(tmp_path), _followed(tmp_path)
    reader = LogReader(log_store(), attempt_stream(run.run.log.job_id, 0, 1), 0)
    for _ in range(3 * _QUIET_SHIP_EVERY):  # quiet for long: its log is read every few cycles only
        assert _cycle(run) == {}
    with (job / "run.log").open("ab") as log:
        log.write(b"epoch 1\n")
    for _ in range(_QUIET_SHIP_EVERY):
        _cycle(run)
    assert reader.read() == b"epoch 1\n"
    for _ in range(2 * _QUIET_SHIP_EVERY):
        _cycle(run)
    with (job / "run.log").open("ab") as log:
        log.write(b"epoch 2\n")
    # The end is seen the next cycle, and the last bytes shipped before it however quiet the run was.
    _write_state(job, {"status": "SUCCEEDED", "exit_code": 0, "pid": os.getpid(), "runner_pid": os.getpid()})
    ended = _cycle(run)
    assert [outcome.status for _, outcome in ended.values()] == [NodeJobStatus.SUCCEEDED]
    assert reader.read() == b"epoch 2\n" and reader.ended


def test_a_runner_killed_under_a_state_file_parsed_before_is_seen_at_once(tmp_path: Path) -> None:
    job, run = _node(tmp_path), _followed(tmp_path)
    runner = subprocess.Popen(["sleep", "60"])
    try:
        _write_state(job, {"status": "RUNNING", "pid": runner.pid, "runner_pid": runner.pid})
        assert _cycle(run) == {} and _cycle(run) == {}  # the second from the parse the first kept
    finally:
        runner.kill()
        runner.wait()
    ended = _cycle(run)
    assert [(o.status, o.error) for _, o in ended.values()] == [
        (NodeJobStatus.FAILED, "the job runner was killed while the job ran")
    ]


def test_a_hub_lists_no_node_s_jobs(tmp_path: Path) -> None:
    _node(tmp_path)
    Path(node_runner.job_dir(str(tmp_path), f"{JOB_KEY_PREFIX}{_JOB + 1}")).mkdir()
    report = node_runner.watch(str(tmp_path), [f"{JOB_KEY_PREFIX}{_JOB}"], JOB_KEY_PREFIX, None)
    assert report["newer"] == [] and report["states"][f"{JOB_KEY_PREFIX}{_JOB}"]["status"] == "RUNNING"
    listed = node_runner.watch(str(tmp_path), [f"{JOB_KEY_PREFIX}{_JOB}"], JOB_KEY_PREFIX, _JOB)
    assert listed["newer"] == [f"{JOB_KEY_PREFIX}{_JOB + 1}"]


def test_runs_asked_inline_and_runs_asked_by_a_task_each_end_in_one_cycle(tmp_path: Path) -> None:
    jobs, runs = [], []
    for name in ("inline", "remote"):
        jobs.append(_node(tmp_path / name))
        runs.append(_followed(tmp_path / name, key=name))
    runs[1].in_process = False  # asked as a remote node is: a task of its own
    assert runs[0].in_process and _cycle(*runs) == {}
    for job in jobs:
        _write_state(job, {"status": "FAILED", "exit_code": 3, "pid": os.getpid(), "runner_pid": os.getpid()})
    ended = _cycle(*runs)
    assert {key: outcome.exit_code for key, (_, outcome) in ended.items()} == {"inline": 3, "remote": 3}


class _Signals:
    """A client that records the signal-with-starts and signals sent, by workflow id."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, object]] = []
        self.fail = False
        """Signals fail as an unreachable server's do."""

    async def start_workflow(self, *args: object, id: str, start_signal: str, **kwargs: object) -> None:
        self.sent.append((id, start_signal))

    def get_workflow_handle(self, workflow_id: str) -> _Signals._Handle:
        return _Signals._Handle(self, workflow_id)

    class _Handle:
        def __init__(self, client: _Signals, workflow_id: str) -> None:
            self.client, self.id = client, workflow_id

        async def signal(self, name: str, arg: object) -> None:
            if self.client.fail:
                raise RPCError("unavailable", RPCStatusCode.UNAVAILABLE, b"")
            self.client.sent.append((self.id, (name, arg)))


def test_a_follow_and_a_forget_sent_from_this_process_reach_its_hubs_activity_with_no_query(
    tmp_path: Path,
) -> None:
    """The hub's activity, resting between cycles in this process, is woken and handed the run
    once the hub has it, and lets go of it (and of its runner) before the hub is told: it does not
    wait for its next question to the hub (``_ASK_HUB_EVERY`` cycles), nor ask one. The forget
    sends no signal of its own: the activity owes it to the hub, and sends it before that question."""
    job, run = _node(tmp_path), _followed(tmp_path).run
    runner = _runner(job)
    hub_id = watch_hub_workflow_id(3, run.handle.offering.host)
    client = _Signals()

    async def scenario() -> None:
        inbox = _HERE[hub_id] = _Inbox(set())
        followed: dict[str, Followed] = {}
        env = ActivityEnvironment(client=cast(Client, client))
        try:
            await env.run(follow_run, FollowRunInput(shard=3, run=run))
            assert client.sent == [(hub_id, WatchHubSignal.FOLLOW.value)]
            assert await inbox.exits.wait(60) and inbox.exits.fired() == []  # woken, no runner exited
            inbox.take(followed)
            assert list(followed) == [run.key]
            assert await poll_followed(list(followed.values()), inbox.exits) == {}
            assert inbox.exits.armed(run.key)
            await env.run(forget_run, ForgetRunInput(shard=3, key=run.key, host=run.handle.offering.host))
            assert client.sent[1:] == [] and inbox.owed == {run.key}
            inbox.take(followed)
            assert followed == {} and not inbox.exits.armed(run.key)
            await _owed(cast(Client, client), hub_id, inbox.owed)
            assert client.sent[1:] == [(hub_id, (WatchHubSignal.FORGET.value, [run.key]))]
            assert inbox.owed == set()
        finally:
            inbox.exits.close()
            del _HERE[hub_id]

    try:
        asyncio.run(scenario())
    finally:
        runner.kill()
        runner.wait()


def test_the_end_of_a_run_forgotten_while_it_was_asked_is_not_sent(tmp_path: Path) -> None:
    """A cancel forgets its run, then removes its cluster, which ends the run: a cycle that read
    that end after the forget was told sends no end to the owner (it waits for none)."""
    job, followed = _node(tmp_path), _followed(tmp_path)
    _write_state(job, {"status": "FAILED", "exit_code": 137, "pid": os.getpid(), "runner_pid": os.getpid()})
    client = _Signals()

    async def scenario() -> None:
        inbox = _Inbox(set())
        runs = {followed.run.key: followed}
        try:
            inbox.forget(followed.run.key)  # told after the cycle listed the runs it asks
            await _ask(cast(Client, client), inbox, runs, [followed])
        finally:
            inbox.exits.close()
        assert runs == {} and client.sent == [] and inbox.owed == {followed.run.key}  # the forget's, no end's

    asyncio.run(ActivityEnvironment().run(scenario))


def test_ends_and_cancels_are_told_to_the_hub_in_one_signal_before_its_next_question(tmp_path: Path) -> None:
    """A run's end goes to its owner at once; the hub is told to forget it later, with the runs a
    cancel let go of here, in one signal (a cancel of thousands sent a signal for nearly each).
    Until then the hub's answers do not bring them back, and a signal that fails keeps them owed."""
    job, ended, other = (
        _node(tmp_path / "ended"),
        _followed(tmp_path / "ended"),
        _followed(tmp_path / "other", "b"),
    )
    _write_state(job, {"status": "FAILED", "exit_code": 3, "pid": os.getpid(), "runner_pid": os.getpid()})
    client = _Signals()

    class Hub:
        id = "hub"

        async def query(self, name: str, *args: object, **kwargs: object) -> object:
            if name == WatchHubQuery.VERSION.value:
                return 2
            return FollowSet(version=2, runs=[ended.run, other.run], keys=[ended.run.key, other.run.key])

    async def scenario() -> None:
        inbox = _Inbox(set())
        runs = {ended.run.key: ended}
        try:
            inbox.forget(other.run.key)
            await _ask(cast(Client, client), inbox, runs, [ended])
            assert client.sent == [(ended.run.owner, (RUN_ENDED_SIGNAL, ANY))]
            assert runs == {} and inbox.owed == {ended.run.key, other.run.key}
            await _refresh(cast(Any, Hub()), 1, runs, inbox.exits, inbox.owed)
            assert runs == {}, "a run let go of here is not followed again before the hub is told"

            client.fail = True
            await _owed(cast(Client, client), "hub", inbox.owed)
            assert inbox.owed == {ended.run.key, other.run.key}
            client.fail = False
            await _owed(cast(Client, client), "hub", inbox.owed)
            assert client.sent[1:] == [
                ("hub", (WatchHubSignal.FORGET.value, sorted([ended.run.key, other.run.key])))
            ]
            assert inbox.owed == set()
        finally:
            inbox.exits.close()

    asyncio.run(ActivityEnvironment().run(scenario))


def _runner(job: Path) -> subprocess.Popen[bytes]:
    """A live runner of the node's job, recorded RUNNING as ``node_runner`` records it."""
    runner = subprocess.Popen(["sleep", "600"])
    _write_state(job, {"status": "RUNNING", "pid": runner.pid, "runner_pid": runner.pid})
    return runner


def test_a_held_run_is_asked_when_its_runner_exits_and_not_before(tmp_path: Path) -> None:
    job, run = _node(tmp_path), _followed(tmp_path)
    runner = _runner(job)

    async def follow() -> None:
        exits = RunnerExits()
        try:
            assert await poll_followed([run], exits) == {} and exits.armed(run.run.key)
            # The end record without the runner's exit (which never happens) is not read: not asked.
            _write_state(
                job, {"status": "SUCCEEDED", "exit_code": 0, "pid": runner.pid, "runner_pid": runner.pid}
            )
            assert await poll_followed([run], exits) == {}
            assert not await exits.wait(0.05)
            assert exits.fired() == []
            exits.wake()  # a follow to ask the hub about: woken, nothing fired
            assert await exits.wait(60) and exits.fired() == []
            runner.kill()
            assert await exits.wait(60)  # the kernel's word, not a poll
            assert exits.fired() == [run.run.key] and not exits.armed(run.run.key)
            ended = await poll_followed([run], exits)
            assert [outcome.status for _, outcome in ended.values()] == [NodeJobStatus.SUCCEEDED]
        finally:
            exits.close()

    try:
        asyncio.run(ActivityEnvironment().run(follow))
    finally:
        runner.kill()
        runner.wait()


def test_a_held_run_is_asked_all_the_same_every_few_cycles(tmp_path: Path) -> None:
    job, run = _node(tmp_path), _followed(tmp_path)
    runner = _runner(job)

    async def follow() -> list[int]:
        exits = RunnerExits()
        try:
            assert await poll_followed([run], exits) == {}
            _write_state(
                job, {"status": "FAILED", "exit_code": 7, "pid": runner.pid, "runner_pid": runner.pid}
            )
            for cycle in range(1, 2 * _ASK_HELD_EVERY):
                ended = await poll_followed([run], exits)
                if ended:
                    assert [outcome.exit_code for _, outcome in ended.values()] == [7]
                    return [cycle]
            return []
        finally:
            exits.close()

    try:
        assert asyncio.run(ActivityEnvironment().run(follow)) == [_ASK_HELD_EVERY + 1]
    finally:
        runner.kill()
        runner.wait()


def test_runs_past_the_budget_of_open_files_are_asked_every_cycle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runner_exits, "_BUDGET_SHARE", 0.0)
    job, run = _node(tmp_path), _followed(tmp_path)
    runner = _runner(job)

    async def follow() -> dict[str, tuple[FollowedRun, JobOutcome]]:
        exits = RunnerExits()
        try:
            assert await poll_followed([run], exits) == {} and not exits.armed(run.run.key)
            _write_state(
                job, {"status": "FAILED", "exit_code": 5, "pid": runner.pid, "runner_pid": runner.pid}
            )
            return await poll_followed([run], exits)
        finally:
            exits.close()

    try:
        ended = asyncio.run(ActivityEnvironment().run(follow))
        assert [outcome.exit_code for _, outcome in ended.values()] == [5]
    finally:
        runner.kill()
        runner.wait()
    assert runner_exits._budget.open == 0


def test_the_hub_activity_heartbeats_while_a_cycle_waits_on_a_slow_hub() -> None:
    """A hub that answers slowly (its worker busy with a burst) must not let the heartbeat timeout
    retry the activity, which reads every run again: the activity beats whatever it waits for."""
    beats: list[float] = []

    class SlowHub:
        id = "job-watch:slow"

        async def query(self, *args: object, **kwargs: object) -> object:
            await asyncio.sleep(600)  # the RPC's own timeout ends it in the real client
            raise AssertionError("never answered")

    class Client:
        def get_workflow_handle(self, workflow_id: str) -> SlowHub:
            return SlowHub()

    env = ActivityEnvironment(client=Client())  # type: ignore[arg-type]
    env.on_heartbeat = lambda *details: beats.append(time.monotonic())

    async def watch_then_cancel() -> None:
        watching = asyncio.create_task(env.run(watch_followed, "job-watch:slow"))
        await asyncio.sleep(3.5)
        env.cancel()
        with pytest.raises(asyncio.CancelledError):
            await watching

    asyncio.run(watch_then_cancel())
    assert len(beats) >= 3, beats


def test_without_pidfds_a_run_is_asked_every_cycle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not Linux (macOS has no pidfd_open): nothing is held, and the run's end shows next cycle."""
    monkeypatch.delattr(os, "pidfd_open")
    job, run = _node(tmp_path), _followed(tmp_path)

    async def follow() -> dict[str, tuple[FollowedRun, JobOutcome]]:
        exits = RunnerExits()
        assert await poll_followed([run], exits) == {} and not exits.armed(run.run.key)
        _write_state(
            job, {"status": "SUCCEEDED", "exit_code": 0, "pid": os.getpid(), "runner_pid": os.getpid()}
        )
        return await poll_followed([run], exits)

    ended = asyncio.run(ActivityEnvironment().run(follow))
    assert [outcome.status for _, outcome in ended.values()] == [NodeJobStatus.SUCCEEDED]
