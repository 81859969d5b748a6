"""Recorded ``ClusterWorkflow`` histories must replay on the current code.

Clusters live for days: a change to the workflow that would make a running cluster's history
non-deterministic fails here, in CI, instead of in production. Such a change needs
``workflow.patched``; new scenarios are recorded with ``python -m tests.cluster.record_histories``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from tests.conftest import run
from workflows.cluster import ClusterWorkflow

HISTORIES = sorted((Path(__file__).parent / "histories").glob("*.json"))


def test_histories_are_recorded() -> None:
    assert {path.stem for path in HISTORIES} >= {
        "lifecycle",
        "lifecycle_watched",
        "autostop",
        "continue_as_new_first_run",
        "parallel_submits_worker_killed",
    }


@pytest.mark.parametrize("path", HISTORIES, ids=[path.stem for path in HISTORIES])
def test_history_replays(path: Path) -> None:
    history = WorkflowHistory.from_json(f"cluster:{path.stem}", path.read_text())
    replayer = Replayer(workflows=[ClusterWorkflow], data_converter=pydantic_data_converter)
    result = run(replayer.replay_workflow(history, raise_on_replay_failure=True))
    assert result.replay_failure is None
