"""A worker killed with -9 only delays a managed job: it ends as it should, its log written once."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from skyhop.contract.job_index import ManagedJobStatus
from skyhop.contract.managed_jobs import ManagedJobState
from skyhop.spec import Resources, Task
from tests.conftest import run
from tests.helpers import DevServer, WorkerProcess
from tests.integration.support import client_for
from tests.managed_jobs.support import (
    alive,
    gate,
    job_log,
    open_gate,
    preempt_now,
    start_job,
    state_of,
    until_log,
    until_state,
)
from tests.providers.sim_support import write_plan

pytestmark = pytest.mark.integration

ROUNDS = 3
"""Each phase below once (each round is about 12 s of waiting for Temporal to notice the dead worker)."""


def _starting_no_instance(state: ManagedJobState, cluster: str) -> bool:
    return state.status == ManagedJobStatus.STARTING


def _starting_with_instance(state: ManagedJobState, cluster: str) -> bool:
    return state.status == ManagedJobStatus.STARTING and bool(alive(cluster))


def _running_logged(state: ManagedJobState, cluster: str) -> bool:
    """Running, with output shipped already: the next watcher must not write it again."""
    return state.status == ManagedJobStatus.RUNNING and "before" in job_log(state.job_id, 0, 1)


PHASES = [_starting_no_instance, _starting_with_instance, _running_logged]


def test_worker_kill9_while_provisioning_or_running(
    temporal_server: DevServer, live_worker: WorkerProcess, sim_catalog: Path, tmp_path: Path
) -> None:
    # Every sim API call takes a while, so provisioning spans several of them.
    write_plan(sim_catalog, [], latency_s=0.2)

    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        for round_ in range(ROUNDS):
            phase = PHASES[round_ % len(PHASES)]
            folder = tmp_path / f"round-{round_}"
            folder.mkdir()
            task = Task(run=f"echo before; {gate(folder)}; echo after", resources=Resources(infra="sim"))
            handle = await start_job(client, [task])
            state = await state_of(handle)
            cluster, job_id = state.tasks[0].cluster_name, state.job_id
            await until_state(
                handle, lambda s, p=phase, c=cluster: p(s, c), f"round {round_}: {phase.__name__}"
            )
            live_worker.kill9()
            live_worker.start()
            await until_state(
                handle, lambda s: s.status == ManagedJobStatus.RUNNING, f"round {round_}: running"
            )
            until_log(job_id, 0, 1, "before")
            open_gate(folder)
            try:
                final = await asyncio.wait_for(handle.result(), 120)
            except TimeoutError:
                raise AssertionError(f"round {round_}: {await state_of(handle)}") from None
            assert final.status == ManagedJobStatus.SUCCEEDED, f"round {round_}: {final}"
            assert final.tasks[0].recoveries == 0 and len(final.tasks[0].attempts) == 1, f"round {round_}"
            assert job_log(job_id, 0, 1) == "before\nafter\n", f"round {round_}"
            assert alive(cluster) == [], f"round {round_}"

    run(scenario())


RECOVERY_ROUNDS = 3


def test_worker_kill9_while_recovering(
    temporal_server: DevServer, live_worker: WorkerProcess, sim_catalog: Path, tmp_path: Path
) -> None:
    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        for round_ in range(RECOVERY_ROUNDS):
            write_plan(sim_catalog, [], latency_s=0.2)
            folder = tmp_path / f"round-{round_}"
            folder.mkdir()
            task = Task(run=f"echo before; {gate(folder)}; echo after", resources=Resources(infra="sim"))
            handle = await start_job(client, [task])
            state = await state_of(handle)
            cluster, job_id = state.tasks[0].cluster_name, state.job_id
            until_log(job_id, 0, 1, "before")
            preempt_now(cluster)  # once its run printed (a plan's timer could beat the run: seen in CI)
            await until_state(
                handle,
                lambda s: s.status == ManagedJobStatus.RECOVERING,
                f"round {round_}: recovering",
                each=lambda c=cluster: alive(c),
            )
            live_worker.kill9()
            live_worker.start()
            until_log(job_id, 0, 2, "before")
            open_gate(folder)
            try:
                final = await asyncio.wait_for(handle.result(), 120)
            except TimeoutError:
                raise AssertionError(f"round {round_}: {await state_of(handle)}") from None
            assert final.status == ManagedJobStatus.SUCCEEDED, f"round {round_}: {final}"
            outcomes = [a.outcome for a in final.tasks[0].attempts]
            assert outcomes == ["preempted", "succeeded"], f"round {round_}: {outcomes}"
            assert job_log(job_id, 0, 1) == "before\n" and job_log(job_id, 0, 2) == "before\nafter\n"
            assert alive(cluster) == [], f"round {round_}"

    run(scenario())
