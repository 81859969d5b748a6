"""The pure parts of a managed job: what a run's end leads to, where the next cluster is searched,
and how the watcher keeps a job's output (no server needed)."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.testing import ActivityEnvironment

from skyhop.activities.log_store import attempt_log
from skyhop.activities.models import AttemptLog
from skyhop.activities.watch_hub import _ship_log
from skyhop.contract.managed_jobs import TaskAttempt, jobgroup_env_name
from skyhop.optimizer.blocklist import Blocked, Blocklist
from skyhop.providers.base import NodeStatus
from skyhop.spec import JobRecovery, Resources
from skyhop.workflows.recovery import PREEMPTED, Search, Verdict, nodes_lost, searches_for, verdict
from tests.conftest import run

EAGER = JobRecovery()
FAILOVER = JobRecovery(strategy="FAILOVER")


def _attempt(outcome: str) -> TaskAttempt:
    return TaskAttempt(
        number=1, cluster_name="job-1", started_at=0, outcome=outcome, provider="sim", region="r1"
    )


@pytest.mark.parametrize(
    ("succeeded", "preempted", "code", "policy", "restarts", "expected"),
    [
        (True, False, 0, EAGER, 0, Verdict.SUCCEEDED),
        (False, True, None, EAGER, 0, Verdict.RECOVER),
        (False, False, 3, EAGER, 0, Verdict.FAILED),
        (False, False, 3, JobRecovery(max_restarts_on_errors=2), 1, Verdict.RESTART),
        (False, False, 3, JobRecovery(max_restarts_on_errors=2), 2, Verdict.FAILED),
        (False, False, 42, JobRecovery(recover_on_exit_codes=[42]), 0, Verdict.RECOVER),
    ],
)
def test_verdict(
    succeeded: bool, preempted: bool, code: int | None, policy: JobRecovery, restarts: int, expected: Verdict
) -> None:
    assert verdict(succeeded, preempted, code, policy, restarts) == expected


def test_any_node_not_up_is_lost() -> None:
    assert not nodes_lost([NodeStatus.UP, NodeStatus.UP])
    assert all(
        nodes_lost([NodeStatus.UP, s])
        for s in (NodeStatus.STOPPED, NodeStatus.TERMINATED, NodeStatus.PREEMPTED)
    )


def test_searches_after_a_preemption_follow_the_strategy() -> None:
    region = Blocked(provider="sim", region="r1")
    anywhere = Search()
    assert searches_for(None, EAGER, Resources()) == [anywhere]
    assert searches_for(_attempt("failed (exit 3)"), EAGER, Resources()) == [anywhere]
    assert searches_for(_attempt(PREEMPTED), EAGER, Resources()) == [
        Search(blocklist=Blocklist(entries=[region])),
        anywhere,
    ]
    assert searches_for(_attempt(PREEMPTED), EAGER, Resources(infra="sim/r1")) == [anywhere]
    assert searches_for(_attempt(PREEMPTED), FAILOVER, Resources()) == [Search(pin=region), anywhere]


def test_jobgroup_names() -> None:
    assert jobgroup_env_name("worker-1", 1) == "WORKER_1"
    assert jobgroup_env_name(None, 2) == "TASK2"


def _ship(node: _Node, log: AttemptLog, limit: int | None) -> None:
    """One poll's shipping, inside an activity (it heartbeats)."""
    store = attempt_log(log.job_id, log.task_index, log.attempt)
    run(ActivityEnvironment().run(_ship_log, node, "job-1", store, limit))  # type: ignore[arg-type]


class _Node:
    """A node runtime whose job log is ``text``."""

    def __init__(self) -> None:
        self.text = b""
        self.reads: list[int] = []

    async def read_log(self, key: str, offset: int, limit: int = 1 << 20) -> bytes:
        self.reads.append(offset)
        return self.text[offset : offset + 4]


def test_a_running_jobs_output_is_shipped_a_bounded_amount_a_poll(tmp_path: Path) -> None:
    log = AttemptLog(job_id=99_999_002, task_index=0, attempt=1)
    node = _Node()
    node.text = b"x" * 10
    _ship(node, log, 6)
    assert attempt_log(99_999_002, 0, 1).read_bytes() == b"x" * 8  # two chunks of four
    _ship(node, log, None)
    assert attempt_log(99_999_002, 0, 1).read_bytes() == b"x" * 10


def test_the_watcher_ships_only_what_the_store_lacks(tmp_path: Path) -> None:
    log = AttemptLog(job_id=99_999_001, task_index=0, attempt=1)
    node = _Node()
    node.text = b"hello world\n"
    _ship(node, log, None)
    _ship(node, log, None)  # a retried watcher
    node.text += b"more\n"
    _ship(node, log, None)
    assert attempt_log(99_999_001, 0, 1).read_bytes() == b"hello world\nmore\n"
    assert node.reads[-3:] == [12, 16, 17]
