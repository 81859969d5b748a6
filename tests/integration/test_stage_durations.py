"""Stage durations the CLI prints stay true when the worker dies in the middle of a stage."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.conftest import run
from tests.helpers import SKYHOP_CLI, DevServer, WorkerProcess, wait_for
from tests.integration.support import client_for, down, unique_cluster

pytestmark = pytest.mark.integration

_SETUP_S = 12


def test_a_stage_the_worker_died_in_shows_its_real_duration(
    temporal_server: DevServer, live_worker: WorkerProcess, cli_env: dict[str, str], tmp_path: Path
) -> None:
    cluster = unique_cluster("dur")
    started = tmp_path / "setup-started"
    task = tmp_path / "task.yaml"
    task.write_text(
        yaml.safe_dump(
            {
                "resources": {"infra": "local"},
                "setup": f"touch {started}; sleep {_SETUP_S}",
                "run": "echo done",
            }
        )
    )
    cli = subprocess.Popen(
        [SKYHOP_CLI, "launch", "-y", "-c", cluster, str(task)],
        env=cli_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(started.exists, 60, "setup to start")
        live_worker.kill9()
        live_worker.start()
        out, err = cli.communicate(timeout=120)
    finally:
        if cli.poll() is None:
            cli.kill()
    assert cli.returncode == 0, err
    seconds = re.search(r"Running setup \(([\d.]+)s\)", err)
    assert seconds is not None, err
    assert float(seconds.group(1)) >= _SETUP_S - 1, err
    run(_down(temporal_server.address, cluster))


async def _down(address: str, cluster: str) -> None:
    await down(await client_for(address), cluster)
