"""A worker process for ``test_task_bound_runner``: a workflow of three activities in a row, with an
update and a query, run by skyhop's workflow runner.

``python -m tests.integration.steps_worker ADDRESS TASK_QUEUE READY_FILE``: the file appears once
the worker polls. The activities run elsewhere (the test's own worker, on ``STEP_QUEUE``), so a test
can freeze this process while a step is in flight and decide when the step ends.
"""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta
from pathlib import Path

from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import Worker

from skyhop.workflows.runner import TaskBoundRunner

STEP_QUEUE_SUFFIX = "-steps"
"""The activities' task queue: the workflow's, with this suffix."""

STEPS = 3


@workflow.defn
class StepsWorkflow:
    def __init__(self) -> None:
        self.done = 0

    @workflow.run
    async def run(self) -> int:
        queue = workflow.info().task_queue + STEP_QUEUE_SUFFIX
        while self.done < STEPS:
            await workflow.execute_activity(
                "step", self.done, task_queue=queue, start_to_close_timeout=timedelta(minutes=2)
            )
            self.done += 1
        return self.done

    @workflow.update
    async def poke(self) -> int:
        return self.done

    @workflow.query
    def steps_done(self) -> int:
        return self.done


async def _serve(address: str, task_queue: str, ready: Path) -> None:
    client = await Client.connect(address)
    worker = Worker(
        client, task_queue=task_queue, workflows=[StepsWorkflow], workflow_runner=TaskBoundRunner()
    )
    async with worker:
        ready.touch()
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(_serve(sys.argv[1], sys.argv[2], Path(sys.argv[3])))
