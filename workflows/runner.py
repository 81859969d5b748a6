"""The workflow runner of skyhop's worker: the SDK's unsandboxed runner, minus activations that no
replay repeats.

Unsandboxed: the SDK's sandbox restricts what a module imported inside it may call, and skyhop's
modules were passed through it (imported once, by the worker: re-running a workflow's module for
every instance cost about 20 ms of CPU each), so it checked none of skyhop's workflow code (the SDK
restricts no passed-through module: a workflow's ``time.time()`` ran).
What it still cost was each instance's restricted environment, built for every new or
evicted-and-replayed workflow and entered on every activation: 1,000 cancelled jobs that had all
left the sticky cache (as in a cancel at 10,000 jobs, where each one is replayed) took 41.0 and
45.7 s to cancel with it and 20.9 s without, the worker's one core (its GIL) the bound. At 10,000
jobs, where the server and the rest of the machine bound the cancel, 2,000 took 63.4 and 72.2 s
without it, within the 65.6 to 79.0 s of four runs with it. Determinism is checked where it can
be: ``tests/unit/test_workflow_determinism.py`` reads every workflow module for clocks,
randomness and I/O, and the replay tests run the recorded histories in the SDK's full sandbox.

Why the rest exists: the SDK core treats a query sent straight to a worker (a "legacy" query, which the
server sends while the workflow has no workflow task in flight, and which can wait in the task
queue while no worker polls) like a workflow task. Core applies the events that arrived since the
last workflow task (say, a finished ``wait_job``) and activates the workflow with them, and the
commands the workflow emits in reply (``start_job`` for the next queued job) wait in core for the
next real workflow task. If that task brings an update, its accept goes out after those commands.
A replay sees the same events and the update in one activation, where the SDK runs updates first:
it emits the accept first, and fails with "Update machine does not handle this event:
ActivityTaskScheduled" — the cluster workflow is stuck for good. It happened after a worker crash
(the restarted worker's first task was such a query, while ``skyhop exec`` followed its job).

Such an activation is recognisable in one of two ways, and the runner fails it in both: core then
answers the query with that failure and evicts the workflow, and the next real workflow task
rebuilds it by replay, in the grouping a replay uses.

- On a workflow the worker holds: events were applied (the history length grew) but no workflow
  task started (the history size, which only a ``WorkflowTaskStarted`` event sets, is the previous
  activation's).
- On a workflow the worker has just rebuilt (it restarted, or had evicted it): the size tells
  nothing there. A query sent while the workflow was idle waits in the task queue while no worker
  polls; when the new worker takes it, its history can end with a workflow task that the crashed
  (frozen) worker had started. Core replays up to the last completed task and applies the rest,
  with that task's size, as if it were this worker's task. What gives it away is what follows:
  the legacy query itself, right after the rebuilt workflow's first live activation. The runner
  fails that query. A real task's query can follow the same way; failing it costs one more replay,
  once per rebuild. It happened in the frozen-worker chaos test
  (``tests/cluster/test_worker_crash.py``); ``tests/integration/test_task_bound_runner.py`` makes
  it happen on purpose.

A legacy query is one whose id is core's ``legacy_query``; a query that came with a workflow task
has an id of its own.
"""

from __future__ import annotations

from collections.abc import Sequence

from temporalio import workflow
from temporalio.bridge.proto.workflow_activation import WorkflowActivation
from temporalio.bridge.proto.workflow_completion import WorkflowActivationCompletion
from temporalio.converter import SerializationContext, StorageDriverStoreContext
from temporalio.worker import (
    UnsandboxedWorkflowRunner,
    WorkflowInstance,
    WorkflowInstanceDetails,
    WorkflowRunner,
)

from skyhop.contract import QUERY_OUTSIDE_TASK

__all__ = ["TaskBoundRunner"]

LEGACY_QUERY_ID = "legacy_query"
"""The id core gives a query sent straight to a worker, outside a workflow task."""


class TaskBoundRunner(WorkflowRunner):
    """A runner whose instances refuse activations that arrive without a workflow task."""

    def __init__(self, inner: WorkflowRunner | None = None) -> None:
        self._inner = inner or UnsandboxedWorkflowRunner()

    def prepare_workflow(self, defn: workflow._Definition) -> None:
        self._inner.prepare_workflow(defn)

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        return _TaskBoundInstance(self._inner.create_instance(det))

    def set_worker_level_failure_exception_types(self, types: Sequence[type[BaseException]]) -> None:
        self._inner.set_worker_level_failure_exception_types(types)


class _TaskBoundInstance(WorkflowInstance):
    def __init__(self, inner: WorkflowInstance) -> None:
        self._inner = inner
        self._seen: tuple[int, int] | None = None
        """(history length, history size) of the last activation that applied a workflow task."""
        self._rebuilding: bool | None = None
        """True while every activation has been a replay: the worker is rebuilding a workflow it did
        not hold (None before the first activation)."""
        self._unproven = False
        """The last activation was a rebuilt instance's first live one, and nothing since showed
        that a workflow task, not a query, brought it."""

    def activate(self, act: WorkflowActivation) -> WorkflowActivationCompletion:
        if _outside_task(act, self._seen) or (self._unproven and _is_legacy_query(act)):
            completion = WorkflowActivationCompletion(run_id=act.run_id)
            completion.failed.failure.message = QUERY_OUTSIDE_TASK
            return completion
        self._unproven = False
        if not all(job.HasField("query_workflow") for job in act.jobs):
            self._seen = (act.history_length, act.history_size_bytes)
            if self._rebuilding is None:
                self._rebuilding = act.is_replaying
            elif self._rebuilding and not act.is_replaying:
                self._rebuilding, self._unproven = False, True
        return self._inner.activate(act)

    def get_serialization_context(self, command_info: object) -> SerializationContext | None:
        return self._inner.get_serialization_context(command_info)  # type: ignore[arg-type]

    def get_external_store_context(self, command_info: object) -> StorageDriverStoreContext:
        return self._inner.get_external_store_context(command_info)  # type: ignore[arg-type]

    def get_info(self) -> workflow.Info:
        return self._inner.get_info()

    def get_thread_id(self) -> int | None:
        return self._inner.get_thread_id()


def _is_legacy_query(act: WorkflowActivation) -> bool:
    return any(
        job.query_workflow.query_id == LEGACY_QUERY_ID for job in act.jobs if job.HasField("query_workflow")
    )


def _outside_task(act: WorkflowActivation, seen: tuple[int, int] | None) -> bool:
    """New events applied live while the history size stayed put: no workflow task started."""
    if seen is None or act.is_replaying or any(job.HasField("remove_from_cache") for job in act.jobs):
        return False
    length, size = seen
    return act.history_length > length and act.history_size_bytes == size
