"""What a managed task does when its run ends, and where its next cluster is searched: pure rules.

* A run that ended without succeeding, on nodes the provider says are gone or not UP, was
  preempted: the task recovers on a new cluster (``recoveries``). On nodes still UP it failed:
  an exit code in ``recover_on_exit_codes`` recovers the same way without counting as a restart;
  otherwise it restarts on the same cluster while ``restarts < max_restarts_on_errors``, else the
  task FAILED.
* The next cluster's searches, in order (the last one waits for capacity and is the only one
  ``max_searches`` bounds): after a preemption, ``EAGER_NEXT_REGION`` first searches with the
  preempted region blocked (unless the task pins a region or zone), ``FAILOVER`` first inside
  the preempted region; then both search everywhere. Any other new cluster searches everywhere.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel

from skyhop.contract.managed_jobs import TaskAttempt
from skyhop.optimizer.blocklist import Blocked, Blocklist
from skyhop.providers.base import NodeStatus
from skyhop.spec import JobRecovery, Resources

__all__ = ["PREEMPTED", "Search", "Verdict", "nodes_lost", "searches_for", "verdict"]

PREEMPTED = "preempted"
"""``TaskAttempt.outcome`` of an attempt whose nodes the provider took back."""


class Verdict(StrEnum):
    SUCCEEDED = "succeeded"
    RECOVER = "recover"
    """A new cluster (preempted, or an exit code the policy recovers from)."""
    RESTART = "restart"
    """Run again on the same cluster (a user failure, with restarts left)."""
    FAILED = "failed"


class Search(BaseModel):
    """One search for a task's cluster: what is ruled out, and where to stay."""

    blocklist: Blocklist = Blocklist()
    pin: Blocked | None = None


def nodes_lost(statuses: list[NodeStatus]) -> bool:
    """Whether the provider's answer means the nodes were taken: any node gone or not UP."""
    return any(status != NodeStatus.UP for status in statuses)


def verdict(
    succeeded: bool, preempted: bool, exit_code: int | None, policy: JobRecovery, restarts: int
) -> Verdict:
    """What the task does after a run ended (see the module docstring)."""
    if succeeded:
        return Verdict.SUCCEEDED
    if preempted or (exit_code is not None and exit_code in policy.recover_on_exit_codes):
        return Verdict.RECOVER
    return Verdict.RESTART if restarts < policy.max_restarts_on_errors else Verdict.FAILED


def searches_for(last: TaskAttempt | None, policy: JobRecovery, resources: Resources) -> list[Search]:
    """The searches of the task's next cluster, given its last attempt (None: its first cluster)."""
    everywhere = Search()
    if last is None or last.outcome != PREEMPTED or last.provider is None:
        return [everywhere]
    if policy.strategy == "FAILOVER":
        return [Search(pin=Blocked(provider=last.provider, region=last.region)), everywhere]
    if resources.region is not None or resources.zone is not None:
        return [everywhere]
    preempted_region = Blocked(provider=last.provider, region=last.region)
    return [Search(blocklist=Blocklist(entries=[preempted_region])), everywhere]
