"""A pool whose busy worker is preempted (sim): the job waits for another worker and succeeds there,
and the pool replaces the lost worker. Driven through the Temporal client, as a program would."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from temporalio.client import WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy

from skyhop.cli.failures import asked_again
from skyhop.contract import WORKFLOW_QUEUE, WorkflowType
from skyhop.contract.job_index import ManagedJobStatus
from skyhop.contract.pools import PoolApply, PoolQuery, PoolRequest, PoolState, PoolUpdate, pool_workflow_id
from skyhop.spec import Resources, Task
from skyhop.spec.pool import Pool
from tests.conftest import run
from tests.helpers import DevServer, WorkerProcess, wait_for
from tests.integration.support import client_for
from tests.managed_jobs.support import alive, gate, open_gate, preempt_now, start_job, until_state
from tests.providers.sim_support import write_plan

pytestmark = pytest.mark.integration


async def _pool_state(handle: WorkflowHandle[object, PoolState]) -> PoolState:
    state: PoolState = await asked_again(lambda: handle.query(PoolQuery.STATE, result_type=PoolState))
    return state


def test_a_job_whose_worker_is_lost_runs_again_on_the_replacement(
    temporal_server: DevServer, live_worker: WorkerProcess, sim_catalog: Path, tmp_path: Path
) -> None:
    write_plan(sim_catalog, [])
    name = f"p{uuid.uuid4().hex[:6]}"
    pool_task = Task(
        setup=f"echo set up >> {tmp_path}/setups.log",
        resources=Resources(infra="sim", use_spot=True),
        pool=Pool(workers=1),
    )

    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        pool: WorkflowHandle[object, PoolState] = await client.start_workflow(
            WorkflowType.POOL,
            # A short history: the pool continues as new once its workers are settled, carrying them.
            PoolRequest(name=name, user="tester", check_seconds=1, history_limit=40),
            id=pool_workflow_id(name),
            task_queue=WORKFLOW_QUEUE,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            result_type=PoolState,
        )
        await pool.execute_update(
            PoolUpdate.APPLY, PoolApply(task=pool_task, workers=1), result_type=PoolState
        )
        first_run = (await pool.describe()).run_id
        job = await start_job(client, [Task(run=f"echo on $(hostname); {gate(tmp_path)}")], pool=name)
        state = await until_state(job, lambda s: s.status == ManagedJobStatus.RUNNING, "the first run", 240)
        first = state.tasks[0].cluster_name
        assert first == f"{name}-worker-1"
        # Only a running instance can be preempted: the sim moves it there on an API call.
        wait_for(lambda: [i["state"] for i in alive(first)] == ["running"], 120, "the worker's node running")
        preempt_now(first)
        state = await until_state(
            job,
            lambda s: s.tasks[0].recoveries == 1 and s.status == ManagedJobStatus.RUNNING,
            "the run on the replacement worker",
            240,
            each=lambda: alive(first),  # the sim applies a due preemption on its next API call
        )
        assert state.tasks[0].cluster_name == f"{name}-worker-2"
        assert [a.outcome for a in state.tasks[0].attempts[:1]] == ["its worker was lost"]
        open_gate(tmp_path)
        final = await job.result()
        assert final.status == ManagedJobStatus.SUCCEEDED, final.end
        wait_for(lambda: alive(first) == [], 120, "the lost worker's cluster torn down")
        workers = (await _pool_state(pool)).workers
        assert [(w.cluster_name, w.status) for w in workers] == [(f"{name}-worker-2", "IDLE")]
        deadline = asyncio.get_running_loop().time() + 120
        while (await pool.describe()).run_id == first_run:
            assert asyncio.get_running_loop().time() < deadline, "the pool never continued as new"
            await asyncio.sleep(0.5)
        workers = (await _pool_state(pool)).workers  # carried across, and watched again
        assert [(w.cluster_name, w.status) for w in workers] == [(f"{name}-worker-2", "IDLE")]
        await pool.cancel()
        down = await pool.result()
        assert down.status == "DOWN" and down.workers == []
        assert alive(f"{name}-worker-2") == []
        assert len((tmp_path / "setups.log").read_text().splitlines()) == 2  # one per worker

    run(scenario())
