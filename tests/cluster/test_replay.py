"""Recorded ``ClusterWorkflow``, ``LaunchWorkflow``, ``ServiceWorkflow`` and ``ManagedJobWorkflow``
histories must replay on the current code.

Clusters and services live for days, and so does a launch in ``--retry-until-up``: a change to a
workflow that would make a running one's history non-deterministic fails here, in CI, instead of in
production. Such a change needs ``workflow.patched``; new scenarios are recorded with
``python -m tests.cluster.record_histories``, ``python -m tests.launch.record_histories`` and
``python -m tests.serve.record_histories``. The managed jobs' are runs of
``tests/managed_jobs/test_lifecycle.py``'s cancel scenarios, their payloads decrypted; those named
``*_before_baseline`` come from before ``workflows.changes``, and replay through its fallback (each
older patch asked where it always was); ``*_carried_*`` is a continued run that carries its baseline
in its input and records no marker (``ManagedJobResume.baseline``); ``*_started_following_*`` are
the three runs of a job under its second baseline (one activity starts, follows and reports a run):
launched, preempted and relaunched, cancelled.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from skyhop.workflows.cluster import ClusterWorkflow
from skyhop.workflows.launch import LaunchWorkflow
from skyhop.workflows.managed_job import ManagedJobWorkflow
from skyhop.workflows.service import ServiceWorkflow
from tests.conftest import run

_TESTS = Path(__file__).parent.parent
WORKFLOW_IDS = _TESTS / "launch" / "histories" / "workflow_ids.json"
"""Recorded workflow ids, for histories whose commands depend on it (a launch names its lease by it)."""
HISTORIES = sorted(
    path
    for path in [
        *(_TESTS / "cluster" / "histories").glob("*.json"),
        *(_TESTS / "launch" / "histories").glob("*.json"),
        *(_TESTS / "serve" / "histories").glob("*.json"),
        *(_TESTS / "managed_jobs" / "histories").glob("*.json"),
    ]
    if path != WORKFLOW_IDS
)


def test_histories_are_recorded() -> None:
    assert {path.stem for path in HISTORIES} >= {
        "lifecycle",
        "lifecycle_watched",
        "autostop",
        "continue_as_new_first_run",
        "parallel_submits_worker_killed",
        "launch_failover",
        "launch_existing_cluster",
        "launch_cancelled",
        "launch_continue_as_new_first_run",
        "launch_leased_failover",
        "launch_leased_existing_cluster",
        "launch_leased_cancelled",
        "launch_leased_continue_as_new_first_run",
        "launch_leased_continue_as_new_second_run",
        "lock_lease",
        "service_update_at_max_replicas",
        "service_update_rolled_back",
        "service_scale_from_zero",
        "service_update_under_baseline",
        "managed_job_cancelled_starting_before_baseline",
        "managed_job_cancelled_running_before_baseline",
        "managed_job_preempted_first_run_before_baseline",
        "managed_job_preempted_cancelled_recovering_before_baseline",
        "managed_job_running_first_run",
        "managed_job_running_continued_cancelled",
        "managed_job_running_continued_carried_cancelled",
        "managed_job_preempted_cancelled_recovering",
        "managed_job_started_following_first_run",
        "managed_job_started_following_preempted_relaunched",
        "managed_job_started_following_continued_cancelled",
    }


@pytest.mark.parametrize("path", HISTORIES, ids=[path.stem for path in HISTORIES])
def test_history_replays(path: Path) -> None:
    workflow_id = json.loads(WORKFLOW_IDS.read_text()).get(path.stem, path.stem)
    history = WorkflowHistory.from_json(workflow_id, path.read_text())
    replayer = Replayer(
        workflows=[ClusterWorkflow, LaunchWorkflow, ManagedJobWorkflow, ServiceWorkflow],
        data_converter=pydantic_data_converter,
    )
    result = run(replayer.replay_workflow(history, raise_on_replay_failure=True))
    assert result.replay_failure is None
