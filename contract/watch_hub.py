"""The watch hub part of the contract: ``WatchHubWorkflow``, which follows managed jobs' runs.

A managed job's running attempt is followed by one of ``WATCH_HUB_SHARDS`` hub workflows, id
``job-watch:<k>`` on ``skyhop-workflows`` (``watch_hub_workflow_id``, ``k`` from the job id:
``watch_hub_shard``), not by an activity of its own: a hub's one activity polls every run it
follows. A run is followed with the ``follow`` signal (sent with the hub's start) and dropped with
``forget``; when it ends, its owner gets the ``run_ended`` signal (``RunEnded``), at least once:
an owner handles the first for a key it waits on and ignores any other. A run on a cluster bound
to one machine (``local``) is followed by that machine's hub of the shard, ``job-watch:<k>@<host>``,
whose activity runs on that machine's long queue.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel

from skyhop.providers.base import NodeStatus
from skyhop.providers.runtime.jobs import JobOutcome

__all__ = [
    "RUN_ENDED_SIGNAL",
    "WATCH_HUB_SHARDS",
    "RunEnded",
    "WatchHubQuery",
    "WatchHubSignal",
    "run_key",
    "watch_hub_shard",
    "watch_hub_workflow_id",
]

WATCH_HUB_SHARDS = 32
"""Hubs in all: 10,000 running jobs cost this many activities (about 300 runs each), not 10,000."""
RUN_ENDED_SIGNAL = "run_ended"
"""Signal a hub sends a run's owner when the run ended (``RunEnded``)."""


class WatchHubSignal(StrEnum):
    FOLLOW = "follow"
    """Follow a run (``activities.models.FollowedRun``); a key followed already is kept as it is."""
    FORGET = "forget"
    """Stop following these keys (a list of ``run_key`` strings); unknown keys are ignored."""


class WatchHubQuery(StrEnum):
    VERSION = "version"
    """A number that changes whenever the follow set does: cheap to ask every poll."""
    FOLLOWED = "followed"
    """The follow set and its version (``activities.models.FollowSet``); given a version it saw
    before, only what changed since: the runs followed and the keys forgotten since (every key
    followed instead, when the hub no longer keeps every forget since that version)."""


class RunEnded(BaseModel):
    """A followed run's end, as its owner receives it."""

    key: str
    """The run's ``run_key``."""
    outcome: JobOutcome
    node_statuses: list[NodeStatus] | None = None
    """The provider's answer for the run's nodes, asked by the hub once it saw a run end without
    success (one question per ended run, all of a cycle's at once), so the owner decides at once.
    None: a success, or the provider did not answer in time or cannot tell; the owner then asks
    it itself (never taking no answer for a preemption)."""


def run_key(owner_workflow_id: str, task_index: int, attempt: int) -> str:
    """Unique among every hub's runs: an owner runs one attempt of a task at a time."""
    return f"{owner_workflow_id}/task-{task_index}/attempt-{attempt}"


def watch_hub_shard(job_id: int) -> int:
    return job_id % WATCH_HUB_SHARDS


def watch_hub_workflow_id(shard: int, host: str | None = None) -> str:
    """Shard ``shard``'s hub; ``host``: the one for runs on clusters bound to that machine."""
    return f"job-watch:{shard}" + (f"@{host}" if host else "")
