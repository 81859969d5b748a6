"""A watch hub's cycle over a run on a folder node: what it reads, what it ships, what it misses not."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from pathlib import Path

from temporalio.testing import ActivityEnvironment

from skyhop.activities.models import AttemptLog, FollowedRun, WatchedJob
from skyhop.activities.watch_hub import _QUIET_SHIP_EVERY, Followed, poll_followed
from skyhop.contract import JOB_KEY_PREFIX
from skyhop.providers.base import ClusterHandle, NodeHandle, Offering
from skyhop.providers.runtime import node_runner
from skyhop.providers.runtime.jobs import JobOutcome, NodeJobStatus
from skyhop.storage.logs import LogReader, attempt_stream, log_store

_JOB = 1
_ATTEMPT_LOG = AttemptLog(job_id=9001, task_index=0, attempt=1)


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
    offering = Offering(provider="local", instance_type="local", cpus=1, memory_gib=1, price=0)
    node = NodeHandle(rank=0, instance_id="i-0", ip="127.0.0.1", runtime_dir=str(root))
    return Followed(
        FollowedRun(
            key=key,
            owner="managed-job:9001",
            handle=ClusterHandle(cluster_name="hub-cycle", offering=offering, nodes=[node]),
            job=WatchedJob(job_id=_JOB, nodes=[0], running=True),
            log=_ATTEMPT_LOG,
        )
    )


def _cycle(*runs: Followed) -> dict[str, tuple[FollowedRun, JobOutcome]]:
    return asyncio.run(ActivityEnvironment().run(poll_followed, list(runs)))


def test_a_quiet_runs_output_is_shipped_within_a_few_cycles_and_all_of_it_by_its_end(tmp_path: Path) -> None:
    job, run = _node(tmp_path), _followed(tmp_path)
    reader = LogReader(log_store(), attempt_stream(9001, 0, 1), 0)
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
