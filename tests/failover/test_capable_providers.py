"""Failover never spends an attempt on a provider that cannot serve the task."""

from __future__ import annotations

from pathlib import Path

import pytest

from skyhop.cli.failures import asked_again
from skyhop.contract.clusters import LaunchProgress
from skyhop.spec import Task
from tests.conftest import run
from tests.failover.support import start_launch
from tests.helpers import DevServer, WorkerProcess
from tests.integration.support import client_for, down, unique_cluster
from tests.providers.sim_support import ZONES, write_plan

pytestmark = pytest.mark.integration


def test_a_launch_needing_ports_fails_over_within_sim_never_trying_local(
    temporal_server: DevServer, live_worker: WorkerProcess, sim_catalog: Path
) -> None:
    # local is free, so it would come first; it cannot open ports, so it is no candidate at all.
    write_plan(sim_catalog, [{"zone": ZONES[0][1], "error": "capacity"}])
    task = Task.model_validate(
        {"run": "echo up", "resources": {"any_of": [{"infra": "local"}, {"infra": "sim"}], "ports": ["8080"]}}
    )
    cluster = unique_cluster("caps")

    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        handle = await start_launch(client, cluster, task)
        try:
            result = await handle.result()
            progress = await asked_again(lambda: handle.query("progress", result_type=LaunchProgress))
        finally:
            await down(client, cluster)
        assert result.handle is not None and result.handle.offering.provider == "sim"
        assert [(a.provider, a.zone, a.kind) for a in progress.attempts] == [("sim", ZONES[0][1], "capacity")]

    run(scenario())
