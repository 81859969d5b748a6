"""The pure parts of a managed job: what a run's end leads to, where the next cluster is searched
(no server needed). How a watcher ships a run's output: ``tests/storage/test_log_chunks.py``."""

from __future__ import annotations

import pytest

from skyhop.contract.managed_jobs import TaskAttempt, jobgroup_env_name
from skyhop.optimizer.blocklist import Blocked, Blocklist
from skyhop.providers.base import NodeStatus
from skyhop.spec import JobRecovery, Resources
from skyhop.workflows.recovery import PREEMPTED, Search, Verdict, nodes_lost, searches_for, verdict

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
