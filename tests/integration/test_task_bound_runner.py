"""``workflows.runner`` against a real server: a worker restarted after a frozen one took a workflow
task never answers a legacy query with that task's events applied.

The scenario, as the frozen-worker chaos test met it by chance: a query sent while the workflow is
idle goes straight to a worker and waits while none answers; the workflow's next task is started
by the frozen worker; the worker that replaces it takes the query first, whose history ends with
that started task, and applies its events as if they were its own task. The commands that makes
then went out ahead of the next real task's update responses, and the history no longer replayed
("Update machine does not handle this event: ActivityTaskScheduled").
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.worker import Replayer, Worker

from skyhop.contract import QUERY_OUTSIDE_TASK
from skyhop.workflows.runner import TaskBoundRunner
from tests.helpers import DevServer, until_true, wait_for
from tests.integration.steps_worker import STEP_QUEUE_SUFFIX, STEPS, StepsWorkflow

REPO = Path(__file__).resolve().parents[2]
ATTEMPTS = 3
"""Scenarios to run until one met its timing (the frozen worker took the task): usually the first."""


def test_a_restarted_worker_refuses_a_query_that_brings_the_frozen_workers_task(
    temporal_server: DevServer, tmp_path: Path
) -> None:
    met = False
    for attempt in range(ATTEMPTS):
        outcome = asyncio.run(_scenario(temporal_server.address, tmp_path / f"attempt-{attempt}"))
        assert outcome.replay_failure is None, outcome.replay_failure
        assert outcome.result == STEPS
        met = outcome.task_timed_out and QUERY_OUTSIDE_TASK in outcome.answers
        if met:
            break
    assert met, f"in {ATTEMPTS} attempts, no query reached the new worker with the frozen worker's task"


@dataclass(frozen=True)
class _Outcome:
    result: int
    answers: str
    """Every query's answer or error, joined."""
    task_timed_out: bool
    """A workflow task timed out: the frozen worker had taken it."""
    replay_failure: Exception | None


async def _scenario(address: str, folder: Path) -> _Outcome:
    folder.mkdir()
    client = await Client.connect(address)
    queue = f"steps-{uuid.uuid4().hex[:8]}"
    started: set[int] = set()
    release = asyncio.Event()

    @activity.defn(name="step")
    async def step(n: int) -> int:
        started.add(n)
        if n == 1:
            await release.wait()
        return n

    workers: list[subprocess.Popen[bytes]] = []
    try:
        async with Worker(client, task_queue=queue + STEP_QUEUE_SUFFIX, activities=[step]):
            workers.append(_start_worker(address, queue, folder / "first"))
            handle = await client.start_workflow(StepsWorkflow.run, id=queue, task_queue=queue)

            async def step_1_started() -> bool:
                return 1 in started

            await until_true(step_1_started, "step 1 to start")
            await asyncio.sleep(0.5)  # chaos timing: the first worker polls its sticky queue again
            workers[0].send_signal(signal.SIGSTOP)  # its polls stay open: the server hands it tasks
            queries = [asyncio.create_task(_ask(handle, delay=0.1 * i)) for i in range(2)]
            await asyncio.sleep(0.3)  # the queries leave while the workflow is idle
            release.set()
            with contextlib.suppress(AssertionError):  # else an attempt that missed its timing: run again
                await until_true(lambda: _task_started_after(handle), "the frozen worker's task", timeout=15)
            updates = [asyncio.create_task(handle.execute_update(StepsWorkflow.poke)) for _ in range(3)]
            workers[0].kill()
            workers.append(_start_worker(address, queue, folder / "second"))
            answers = " | ".join(await asyncio.wait_for(asyncio.gather(*queries), 120))
            await asyncio.wait_for(asyncio.gather(*updates), 120)
            result = await asyncio.wait_for(handle.result(), 120)
            history = await handle.fetch_history()
    finally:
        for proc in workers:
            proc.kill()
            proc.wait()
    timed_out = any(e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT for e in history.events)
    replayer = Replayer(workflows=[StepsWorkflow], workflow_runner=TaskBoundRunner())
    replay = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    return _Outcome(result, answers, timed_out, replay.replay_failure)


def _start_worker(address: str, queue: str, folder: Path) -> subprocess.Popen[bytes]:
    folder.mkdir()
    ready = folder / "ready"
    log = open(folder / "worker.log", "ab")  # noqa: SIM115 - lives as long as the process
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.integration.steps_worker", address, queue, str(ready)],
        cwd=REPO, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    wait_for(lambda: ready.exists() or proc.poll() is not None, 60, "the steps worker")
    assert proc.poll() is None, (folder / "worker.log").read_text()[-2000:]
    return proc


async def _ask(handle: WorkflowHandle[StepsWorkflow, int], delay: float) -> str:
    """The query's answer, or the error it got, as text."""
    await asyncio.sleep(delay)
    try:
        return str(await handle.query(StepsWorkflow.steps_done))
    except Exception as exc:  # noqa: BLE001 - the error is the answer this test reads
        return f"{type(exc).__name__}: {exc}"


async def _task_started_after(handle: WorkflowHandle[StepsWorkflow, int]) -> bool:
    """Whether the history ends with a workflow task started after step 1 completed."""
    kinds = [e.event_type async for e in handle.fetch_history_events()]
    completed = EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
    return kinds.count(completed) >= 2 and kinds[-1] == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED
