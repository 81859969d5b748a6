"""Chaos: parallel ``exec`` on a sim cluster while the worker is killed with SIGKILL.

Each round launches a two-node sim cluster, fires a dozen ``skyhop exec`` at once, kills the
worker while their updates are in flight, starts a new one, and checks that the cluster is still
managed: every job ends, ``queue`` and ``down`` work, and the history replays on this code.
"""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest
from temporalio.worker import Replayer

from skyhop.contract import cluster_workflow_id
from skyhop.spec import Resources, Task
from skyhop.workflows.cluster import ClusterWorkflow
from tests.conftest import skyhop
from tests.helpers import SKYHOP_CLI, DevServer, WorkerProcess, wait_for
from tests.integration.support import client_for, cluster_up, current_record, unique_cluster
from tests.providers.sim_support import enabled_sim

pytestmark = pytest.mark.integration

ROUNDS = 6
"""One round per kill point: after 1, 3, 5, 7, 9 and 11 of the ``EXECS`` submissions."""
EXECS = 12


async def _replay_failure(address: str, cluster: str) -> str | None:
    """Why the cluster's current history does not replay on this code, or None when it does."""
    client = await client_for(address)
    history = await client.get_workflow_handle(cluster_workflow_id(cluster)).fetch_history()
    replayer = Replayer(workflows=[ClusterWorkflow], data_converter=client.data_converter)
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    return None if result.replay_failure is None else str(result.replay_failure)


def _submitted(address: str, cluster: str) -> int:
    return len(current_record(address, cluster).jobs)


def test_parallel_execs_survive_a_worker_kill(
    temporal_server: DevServer, live_worker: WorkerProcess, cli_env: dict[str, str], tmp_path: Path
) -> None:
    address = temporal_server.address
    task = Task(num_nodes=2, resources=Resources(infra="sim"))
    for round_ in range(ROUNDS):
        name = unique_cluster("crash")
        with enabled_sim(tmp_path), cluster_up(address, name, task):
            execs = [
                subprocess.Popen(
                    [SKYHOP_CLI, "exec", name, "-d", f"echo job-{i}"],
                    env=cli_env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )  # fmt: skip
                for i in range(EXECS)
            ]
            # Kill at a different point each round (``ROUNDS``).
            kill_after = 1 + (2 * round_) % EXECS
            wait_for(lambda n=name, k=kill_after: _submitted(address, n) >= k, 60, "submissions")  # type: ignore[misc]
            live_worker.kill9()
            live_worker.start()
            outputs = [proc.communicate(timeout=180) for proc in execs]
            failed = [err for proc, (_, err) in zip(execs, outputs, strict=True) if proc.returncode != 0]
            assert not failed, f"round {round_}: {failed}"
            wait_for(
                lambda n=name: (  # type: ignore[misc]
                    all(j.status.done for j in current_record(address, n).jobs)
                    and _submitted(address, n) == EXECS
                ),
                120,
                f"round {round_}: every job to end",
            )
            assert asyncio.run(_replay_failure(address, name)) is None, f"round {round_}"
            queue = skyhop("queue", name, "-a", env=cli_env)
            assert queue.returncode == 0 and queue.stdout.count("SUCCEEDED") == EXECS, queue.stderr
            down = skyhop("down", name, "-y", env=cli_env)
            assert down.returncode == 0, down.stderr
