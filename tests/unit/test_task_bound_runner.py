"""``workflows.runner``: an activation a query brings outside a workflow task never reaches the workflow.

Core applies the events a direct query arrives with (a job that ended) and activates the workflow
with them; the commands the workflow emits wait for the next workflow task, ahead of that task's
update responses — an order no replay repeats. The runner fails such an activation instead (core
then evicts the workflow and rebuilds it by replay), and passes every other activation through.
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio.bridge.proto.workflow_activation import WorkflowActivation
from temporalio.bridge.proto.workflow_completion import WorkflowActivationCompletion
from temporalio.client import WorkflowQueryFailedError
from temporalio.worker import WorkflowInstance, WorkflowInstanceDetails, WorkflowRunner

from skyhop.cli.failures import asked_again
from skyhop.contract import QUERY_OUTSIDE_TASK
from skyhop.workflows.runner import TaskBoundRunner


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
