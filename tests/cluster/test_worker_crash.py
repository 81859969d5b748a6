"""Chaos: parallel ``exec`` on a sim cluster while the worker is killed with SIGKILL.

Each round launches a two-node sim cluster, fires a dozen ``skyhop exec`` at once, kills the
worker while their updates are in flight, starts a new one, and checks that the cluster is still
managed: every job ends, ``queue`` and ``down`` work, and the history replays on this code.

In the followed variant each ``exec`` follows its job (so it reads the cluster all along) and the
worker is frozen before it is killed, so tasks stall on it, and ``status`` runs right after the
restart, as a user's next command would.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
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
FOLLOWED_ROUNDS = 8
"""Rounds of the followed variant's full loop (``SKYHOP_CHAOS_ROUNDS=8``). Each takes 60-90 s on 2
cores (every crash waits out heartbeat and task timeouts), so CI runs only the last one, the
hardest: the longest freeze and outage, then a second crash."""


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
    _crash_rounds(temporal_server, live_worker, cli_env, tmp_path, followed=False, rounds=range(ROUNDS))


def test_followed_execs_survive_a_frozen_worker_kill(
    temporal_server: DevServer, live_worker: WorkerProcess, cli_env: dict[str, str], tmp_path: Path
) -> None:
    count = int(os.environ.get("SKYHOP_CHAOS_ROUNDS", "1"))
    rounds = range(FOLLOWED_ROUNDS - count, FOLLOWED_ROUNDS)
    _crash_rounds(temporal_server, live_worker, cli_env, tmp_path, followed=True, rounds=rounds)


def _crash_rounds(
    temporal_server: DevServer,
    live_worker: WorkerProcess,
    cli_env: dict[str, str],
    tmp_path: Path,
    *,
    followed: bool,
    rounds: range,
) -> None:
    address = temporal_server.address
    task = Task(num_nodes=2, resources=Resources(infra="sim"))
    for round_ in rounds:
        name = unique_cluster("crash")
        # A followed job lasts long enough for the kill to land while jobs run and others queue.
        command = ["sleep 1; echo job-{}"] if followed else ["-d", "echo job-{}"]
        with enabled_sim(tmp_path), cluster_up(address, name, task):
            execs = [
                subprocess.Popen(
                    [SKYHOP_CLI, "exec", name, *command[:-1], command[-1].format(i)],
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
            if followed:
                live_worker.freeze()
                time.sleep(0.5 + round_ % 3)  # chaos timing: how long tasks pile up on the frozen worker
            live_worker.kill9()
            if followed:
                time.sleep(round_ % 4)  # chaos timing: an outage in which reads and job ends pile up
            live_worker.start()
            if followed:
                skyhop("status", env=cli_env)  # the user's next command: it reads the cluster at once
            if followed and round_ % 2:
                live_worker.kill9()  # a second crash soon after the restart
                live_worker.start()
                skyhop("status", env=cli_env)
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
