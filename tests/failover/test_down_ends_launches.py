"""``down`` always ends a launch: it cancels the launch holding the cluster, which cleans up, then tears down.

And Ctrl-C on ``down`` (as on any command) is one line and exit code 130, never a traceback.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from skyhop.cli.failures import asked_again
from skyhop.contract import ClusterStatus
from skyhop.contract.clusters import LaunchProgress, LockHolder
from skyhop.providers.sim import SimCloud
from tests.conftest import run, skyhop
from tests.helpers import SKYHOP_CLI, DevServer, WorkerProcess, wait_for, with_signals
from tests.integration.support import client_for, current_record, record, unique_cluster
from tests.providers.sim_support import write_plan

pytestmark = pytest.mark.integration


def _searching_launch(
    prefix: str, latency_s: float, sim_catalog: Path, tmp_path: Path, env: dict[str, str]
) -> tuple[str, subprocess.Popen[str]]:
    """A ``launch -r`` that can never find capacity (each sim API call takes ``latency_s``), so it
    holds its new cluster's lock for good: the cluster's name and the launch's process."""
    write_plan(
        sim_catalog, [{"region": "us-east-1", "error": "capacity", "after_nodes": 1}], latency_s=latency_s
    )
    cluster = unique_cluster(prefix)
    task = tmp_path / "task.yaml"
    task.write_text(yaml.safe_dump({"resources": {"infra": "sim/us-east-1"}, "run": "echo never"}))
    launch = subprocess.Popen(
        [SKYHOP_CLI, "launch", "-y", "-r", "-c", cluster, str(task)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    wait_for(
        lambda: current_record_or_none(env["SKYHOP_TEMPORAL_ADDRESS"], cluster) is not None,
        60,
        "the launch to hold its cluster",
    )
    return cluster, launch


def current_record_or_none(address: str, cluster: str) -> LockHolder | None:
    try:
        return current_record(address, cluster).holder
    except Exception:
        return None


def test_down_during_a_searching_launch_cancels_it_and_leaves_nothing(
    temporal_server: DevServer,
    live_worker: WorkerProcess,
    cli_env: dict[str, str],
    sim_catalog: Path,
    tmp_path: Path,
) -> None:
    cluster, launch = _searching_launch("downs", 0.2, sim_catalog, tmp_path, cli_env)
    try:
        gone = skyhop("down", "-y", cluster, env=cli_env, timeout=120)
        assert gone.returncode == 0, gone.stderr
        assert "Cancelling launch launch:" in gone.stderr and "which holds cluster" in gone.stderr
        assert f"Cluster {cluster} terminated" in gone.stderr
        _, err = launch.communicate(timeout=60)
        assert launch.returncode == 1 and "cancelled" in err, err
    finally:
        if launch.poll() is None:
            launch.kill()
    assert SimCloud().describe(cluster) == []

    async def status() -> ClusterStatus:
        return (await record(await client_for(temporal_server.address), cluster)).status

    assert run(status()) == ClusterStatus.TERMINATED


def _retry_at(address: str, launch_id: str) -> float | None:
    """When a ``-r`` launch searches again, while it sleeps between searches."""

    async def progress() -> LaunchProgress:
        client = await client_for(address)
        handle = client.get_workflow_handle(launch_id)
        result: LaunchProgress = await asked_again(
            lambda: handle.query("progress", result_type=LaunchProgress)
        )
        return result

    return run(progress()).retry_at


def _ends_cancelled(launch: subprocess.Popen[str]) -> None:
    _, err = launch.communicate(timeout=60)
    assert launch.returncode == 1 and "cancelled" in err, err


def test_down_while_a_retry_until_up_launch_sleeps_between_searches_cancels_it(
    temporal_server: DevServer,
    live_worker: WorkerProcess,
    cli_env: dict[str, str],
    sim_catalog: Path,
    tmp_path: Path,
) -> None:
    cluster, launch = _searching_launch("downr", 0.0, sim_catalog, tmp_path, cli_env)
    try:
        holder = current_record(temporal_server.address, cluster).holder
        assert holder is not None
        wait_for(lambda: _retry_at(temporal_server.address, holder.id) is not None, 60, "the backoff sleep")
        gone = skyhop("down", "-y", cluster, env=cli_env, timeout=60)
        assert gone.returncode == 0, gone.stderr
        _ends_cancelled(launch)
    finally:
        if launch.poll() is None:
            launch.kill()
    assert SimCloud().describe(cluster) == []
    assert current_record(temporal_server.address, cluster).status == ClusterStatus.TERMINATED


def test_down_cancels_the_launches_waiting_for_the_cluster_too(
    temporal_server: DevServer,
    live_worker: WorkerProcess,
    cli_env: dict[str, str],
    sim_catalog: Path,
    tmp_path: Path,
) -> None:
    """Without it, the next ``-r`` launch in the queue gets the lock and ``down`` waits behind it."""
    cluster, first = _searching_launch("downq", 0.2, sim_catalog, tmp_path, cli_env)
    second = subprocess.Popen(
        [SKYHOP_CLI, "launch", "-y", "-r", "-c", cluster, str(tmp_path / "task.yaml")],
        env=cli_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        wait_for(
            lambda: current_record(temporal_server.address, cluster).waiting, 60, "the second launch to queue"
        )
        gone = skyhop("down", "-y", cluster, env=cli_env, timeout=90)
        assert gone.returncode == 0, gone.stderr
        _ends_cancelled(first)
        _ends_cancelled(second)
    finally:
        for launch in (first, second):
            if launch.poll() is None:
                launch.kill()
    assert SimCloud().describe(cluster) == []
    assert current_record(temporal_server.address, cluster).status == ClusterStatus.TERMINATED


def test_ctrl_c_on_down_is_one_line_and_exit_130(
    temporal_server: DevServer,
    live_worker: WorkerProcess,
    cli_env: dict[str, str],
    sim_catalog: Path,
    tmp_path: Path,
) -> None:
    # Slow API calls: the cancelled launch takes seconds to clean up, so down is still waiting.
    cluster, launch = _searching_launch("downc", 3, sim_catalog, tmp_path, cli_env)
    try:
        down = subprocess.Popen(
            with_signals([SKYHOP_CLI, "down", "-y", cluster], default=(signal.SIGINT,)),
            env=cli_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert down.stderr is not None
        first = down.stderr.readline()  # down is waiting for the launch to clean up
        assert "Cancelling launch" in first, first
        time.sleep(0.5)  # let it be well inside the wait for the update
        down.send_signal(signal.SIGINT)
        rest = down.communicate(timeout=30)[1]
        assert down.returncode == 130, rest
        assert "Traceback" not in rest and len(rest.strip().splitlines()) == 1, rest
    finally:
        skyhop("down", "-y", cluster, env=cli_env, timeout=120)
        launch.communicate(timeout=60)
    assert SimCloud().describe(cluster) == []


def test_ctrl_c_at_downs_confirmation_is_one_line_and_exit_130(cli_env: dict[str, str]) -> None:
    down = subprocess.Popen(
        with_signals([SKYHOP_CLI, "down", "some-cluster"], default=(signal.SIGINT,)),
        env=cli_env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert down.stderr is not None
    prompt = ""
    while "Tear down" not in prompt:  # the prompt has no newline: read it character by character
        char = down.stderr.read(1)
        assert char, "no prompt"
        prompt += char
    down.send_signal(signal.SIGINT)
    _, rest = down.communicate(timeout=30)
    assert down.returncode == 130, rest
    assert "Traceback" not in rest and rest.strip() == "Interrupted.", rest
