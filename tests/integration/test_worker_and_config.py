"""The worker process shuts down cleanly, and a configured Temporal means the CLI starts nothing."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from tests.conftest import skyhop
from tests.helpers import DevServer, WorkerProcess

pytestmark = pytest.mark.integration


def test_worker_stops_cleanly_on_sigterm(temporal_server: DevServer, tmp_path: Path) -> None:
    worker = WorkerProcess(temporal_server.address, tmp_path)
    worker.start()
    assert worker.proc is not None
    started = time.monotonic()
    worker.proc.send_signal(signal.SIGTERM)
    assert worker.proc.wait(30) == 0
    assert time.monotonic() - started < 15
    assert "worker stopped" in (tmp_path / "worker.log").read_text()


def test_with_an_address_configured_the_cli_connects_and_starts_nothing(
    cli_env: dict[str, str], live_worker: WorkerProcess, tmp_path: Path
) -> None:
    # A home of its own, the worker's store (job logs reach the CLI through the store they share).
    store = (Path(cli_env["SKYHOP_HOME"]) / "store" / "content").as_uri()
    env = {**cli_env, "SKYHOP_HOME": str(tmp_path / "home"), "SKYHOP_STORE_URL": store}
    launched = skyhop("launch", "-y", "-c", "configured", "echo via-config", env=env)
    assert launched.returncode == 0, launched.stderr
    assert launched.stdout == "via-config\n"
    assert "Started the embedded" not in launched.stderr
    status = skyhop("server", "status", env=env)
    assert status.returncode == 0 and '"mode": "external"' in status.stdout
    assert not (tmp_path / "home" / "server").exists()
    assert skyhop("down", "configured", "-y", env=env).returncode == 0


def test_config_file_errors_are_one_line(tmp_path: Path, cli_env: dict[str, str]) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text("temporal:\n  address: x:1\nservr: {}\n")
    env = {k: v for k, v in cli_env.items() if k != "SKYHOP_TEMPORAL_ADDRESS"}
    env["SKYHOP_HOME"] = str(home)
    result = skyhop("status", env=env)
    assert result.returncode == 2
    assert "unknown key 'servr'; allowed: temporal, server, store, r2, minio, kubernetes" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
