"""``workflows.runner``: an activation a query brings outside a workflow task never reaches the workflow.

Core applies the events a direct query arrives with (a job that ended) and activates the workflow
with them; the commands the workflow emits wait for the next workflow task, ahead of that task's
update responses — an order no replay repeats. The runner fails such an activation instead (core
then evicts the workflow and rebuilds it by replay), and on a workflow it rebuilt, the legacy query
that follows its first live activation (whose events a dead worker's task brought); it passes
every other activation through.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from temporalio.bridge.proto.workflow_activation import WorkflowActivation
from temporalio.bridge.proto.workflow_completion import WorkflowActivationCompletion
from temporalio.client import WorkflowQueryFailedError
from temporalio.worker import WorkflowInstance, WorkflowInstanceDetails, WorkflowRunner

from skyhop.cli import failures
from skyhop.cli.failures import asked_again
from skyhop.contract import QUERY_OUTSIDE_TASK
from skyhop.workflows.runner import LEGACY_QUERY_ID, TaskBoundRunner


class _Recording(WorkflowInstance):
    def __init__(self) -> None:
        self.seen: list[WorkflowActivation] = []

    def activate(self, act: WorkflowActivation) -> WorkflowActivationCompletion:
        self.seen.append(act)
        completion = WorkflowActivationCompletion(run_id=act.run_id)
        completion.successful.SetInParent()
        return completion

    def get_serialization_context(self, command_info: Any) -> None:
        return None

    def get_external_store_context(self, command_info: Any) -> Any:
        return None

    def get_info(self) -> Any:
        return None


class _Inner(WorkflowRunner):
    def __init__(self) -> None:
        self.instance = _Recording()

    def prepare_workflow(self, defn: Any) -> None:
        pass

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        return self.instance


def _activation(
    length: int, size: int, job: str = "resolve_activity", replaying: bool = False
) -> WorkflowActivation:
    act = WorkflowActivation(
        run_id="r", history_length=length, history_size_bytes=size, is_replaying=replaying
    )
    getattr(act.jobs.add(), job).SetInParent()
    return act


def _query(length: int, size: int, query_id: str = LEGACY_QUERY_ID) -> WorkflowActivation:
    act = WorkflowActivation(run_id="r", history_length=length, history_size_bytes=size, is_replaying=True)
    act.jobs.add().query_workflow.query_id = query_id
    return act


def _runner() -> tuple[WorkflowInstance, _Recording]:
    inner = _Inner()
    return TaskBoundRunner(inner).create_instance(None), inner.instance  # type: ignore[arg-type]


def test_events_a_query_brought_are_refused_and_the_workflow_never_sees_them() -> None:
    instance, inner = _runner()
    assert instance.activate(_activation(10, 1_000)).HasField("successful")
    # A job ended (events 11-12), and a query carried them here before any workflow task started.
    refused = instance.activate(_activation(12, 1_000))
    assert refused.failed.failure.message == QUERY_OUTSIDE_TASK
    assert [a.history_length for a in inner.seen] == [10]


def test_workflow_tasks_replays_queries_and_evictions_pass() -> None:
    instance, inner = _runner()
    for act in (
        _activation(10, 1_000, replaying=True),
        _activation(14, 1_400),  # a workflow task started: a new size
        _activation(14, 1_400, job="query_workflow"),  # a query on the cached state
        _activation(14, 1_400),  # a local activity resolved within the same task
        _activation(20, 1_400, replaying=True),
        _activation(21, 1_400, job="remove_from_cache"),
    ):
        assert instance.activate(act).HasField("successful")
    assert len(inner.seen) == 6


def test_a_rebuilt_workflows_first_live_events_then_a_legacy_query_refuses_the_query() -> None:
    # A restarted worker rebuilds the workflow for a query whose history ends with a task the frozen
    # worker started: the replay, then those events live with that task's (new) size, then the query.
    instance, inner = _runner()
    assert instance.activate(_activation(3, 200, job="initialize_workflow", replaying=True)).HasField(
        "successful"
    )
    assert instance.activate(_activation(9, 800, replaying=True)).HasField("successful")
    assert instance.activate(_activation(15, 1_400)).HasField("successful")
    refused = instance.activate(_query(15, 1_400))
    assert refused.failed.failure.message == QUERY_OUTSIDE_TASK
    assert len(inner.seen) == 3


def test_a_rebuilt_workflow_answers_legacy_queries_before_and_after_its_first_task() -> None:
    instance, inner = _runner()
    for act in (
        _activation(9, 800, replaying=True),
        _query(9, 800),  # an idle workflow, rebuilt for a query: nothing live, answered
        _activation(15, 1_400),  # its next workflow task
        _query(15, 1_400, query_id="q-1"),  # a query that came with that task: the task was real
        _query(15, 1_400),
    ):
        assert instance.activate(act).HasField("successful")
    assert len(inner.seen) == 5


def test_a_new_workflows_first_task_then_a_legacy_query_answers_it() -> None:
    # Not rebuilt: a workflow's first activation is live, and a client asking it at once is answered.
    instance, inner = _runner()
    assert instance.activate(_activation(3, 200, job="initialize_workflow")).HasField("successful")
    assert instance.activate(_query(3, 200)).HasField("successful")
    assert len(inner.seen) == 2


def test_the_first_activation_of_a_run_passes() -> None:
    instance, inner = _runner()
    assert instance.activate(_activation(3, 0, job="initialize_workflow")).HasField("successful")
    assert len(inner.seen) == 1


def test_the_cli_asks_a_refused_query_again() -> None:
    answers: list[object] = [WorkflowQueryFailedError(QUERY_OUTSIDE_TASK), "record"]

    async def query() -> object:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert asyncio.run(asked_again(query)) == "record"


def test_the_cli_gives_up_on_a_query_refused_for_longer_than_a_task_can_last(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(failures, "_REFUSED_FOR_S", 0.0)
    asked: list[int] = []

    async def query() -> object:
        asked.append(1)
        raise WorkflowQueryFailedError(QUERY_OUTSIDE_TASK)

    with pytest.raises(WorkflowQueryFailedError):
        asyncio.run(asked_again(query))
    assert len(asked) == 1
