"""The embedded server's lifecycle: a crash never leaks a worker, a dead worker is explained and
restarted, and ``skyhop worker`` with nothing configured runs against the embedded server (issue 9)."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
from pathlib import Path

from tests.conftest import REPO, skyhop
from tests.helpers import SKYHOP_CLI, wait_for

CRASHES = 5
"""Server kill -9 and restart cycles per run: a leak on any cycle shows as a second worker."""


def state(env: dict[str, str]) -> dict[str, int]:
    data: dict[str, int] = json.loads((Path(env["SKYHOP_HOME"]) / "server" / "server.json").read_text())
    return data


def processes_naming(text: str) -> list[int]:
    """Live processes whose command line contains ``text`` (each embedded home's paths are unique)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if text.encode() in cmdline.read_bytes() and _state_letter(cmdline.parent) != "Z":
                found.append(int(cmdline.parent.name))
        except OSError:
            continue
    return found


def _state_letter(proc: Path) -> str:
    return (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]


def workers(env: dict[str, str]) -> list[int]:
    return processes_naming(str(Path(env["SKYHOP_HOME"]) / "server" / "worker.ready"))


def servers(env: dict[str, str]) -> list[int]:
    return processes_naming(str(Path(env["SKYHOP_HOME"]) / "server" / "temporal.db"))


def test_each_server_crash_replaces_the_worker_instead_of_leaking_it(fresh_env: dict[str, str]) -> None:
    assert skyhop("server", "start", env=fresh_env).returncode == 0
    for _ in range(CRASHES):
        old = state(fresh_env)
        os.kill(old["server_pid"], signal.SIGKILL)
        wait_for(lambda pid=old["server_pid"]: pid not in servers(fresh_env), 30, "the server to die")
        result = skyhop("status", env=fresh_env)
        assert result.returncode == 0, result.stderr
        new = state(fresh_env)
        assert workers(fresh_env) == [new["worker_pid"]] != [old["worker_pid"]]
        assert servers(fresh_env) == [new["server_pid"]]
    assert skyhop("server", "stop", env=fresh_env).returncode == 0
    assert workers(fresh_env) == [] and servers(fresh_env) == []


def test_a_dead_worker_is_explained_and_server_start_brings_it_back(fresh_env: dict[str, str]) -> None:
    assert skyhop("server", "start", env=fresh_env).returncode == 0
    dead = state(fresh_env)["worker_pid"]
    os.kill(dead, signal.SIGKILL)
    wait_for(lambda: dead not in workers(fresh_env), 30, "the worker to die")
    status = skyhop("server", "status", env=fresh_env)
    assert status.returncode == 1
    assert f"http_api_port   {state(fresh_env)['http_port']}" in status.stdout  # every port skyhop chose
    assert "worker_running  False" in status.stdout
    assert "The worker is not running" in status.stderr and "'skyhop server start'" in status.stderr
    assert skyhop("server", "start", env=fresh_env).returncode == 0
    assert workers(fresh_env) == [state(fresh_env)["worker_pid"]] != [dead]
    assert skyhop("server", "status", env=fresh_env).returncode == 0


def test_skyhop_worker_with_nothing_configured_runs_against_the_embedded_server(
    fresh_env: dict[str, str], tmp_path: Path
) -> None:
    help_text = skyhop("worker", "--help", env=fresh_env).stdout
    assert "embedded server" in help_text
    log = tmp_path / "worker.log"
    with open(log, "wb") as out:
        worker = subprocess.Popen(
            [SKYHOP_CLI, "worker"], env=fresh_env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        wait_for(lambda: b"worker polling" in log.read_bytes() or worker.poll() is not None, 90, "the worker")
        assert worker.poll() is None, log.read_text()
        address = f"127.0.0.1:{fresh_env['SKYHOP_SERVER_PORT']}"
        assert f"running against the embedded server at {address}" in log.read_text()
        assert servers(fresh_env) == [state(fresh_env)["server_pid"]]
        assert workers(fresh_env) == []  # it is the worker; no background one was started for it
    finally:
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(60) == 0, log.read_text()


def test_a_replaced_key_replaces_the_worker_so_launches_keep_working(fresh_env: dict[str, str]) -> None:
    """A worker holding the old key would reject every payload the CLI now signs."""
    assert skyhop("server", "start", env=fresh_env).returncode == 0
    old = state(fresh_env)["worker_pid"]
    key_file = Path(fresh_env["SKYHOP_HOME"]) / "key"
    key_file.write_text(base64.b64encode(os.urandom(32)).decode() + "\n")
    launched = skyhop("launch", "-y", "-c", "rekeyed", "echo after-rekey", env=fresh_env)
    assert launched.returncode == 0, launched.stderr
    assert launched.stdout == "after-rekey\n"
    assert workers(fresh_env) == [state(fresh_env)["worker_pid"]] != [old]
