"""The walking skeleton as a new user runs it: the skyhop CLI in subprocesses, embedded default."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import time
import urllib.request
from contextlib import closing
from pathlib import Path

import pytest

from tests.conftest import REPO, skyhop
from tests.helpers import SKYHOP_CLI, wait_for, with_signals

pytestmark = pytest.mark.e2e


def _ok(result: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert result.returncode == 0, f"stdout: {result.stdout}\nstderr: {result.stderr}"
    return result


def test_launch_exec_status_logs_down(user_env: dict[str, str]) -> None:
    launched = _ok(skyhop("launch", "-y", "-c", "dev", "examples/hello.yaml", env=user_env))
    assert "hello from" in launched.stdout and "node 0 of 1" in launched.stdout
    for stage in ("Optimizing", "Provisioning", "Running setup", "Submitting job"):
        assert stage in launched.stderr
    assert "setting up on node 0" in launched.stderr
    assert "Web UI" not in launched.stdout

    shell = _ok(skyhop("launch", "-y", "-c", "dev", "echo hello from $(hostname)", env=user_env))
    assert "hello from" in shell.stdout
    assert "Provisioning" not in shell.stderr  # the UP cluster is reused

    assert _ok(skyhop("exec", "dev", 'python -c "print(1+1)"', env=user_env)).stdout == "2\n"
    failed = skyhop("exec", "dev", "echo failing; exit 3", env=user_env)
    assert failed.returncode == 3 and failed.stdout == "failing\n"
    assert "exit code 3" in failed.stderr

    table = _ok(skyhop("status", env=user_env)).stdout.splitlines()
    assert table[0].split() == ["CLUSTER", "INFRA", "RESOURCES", "STATUS", "LAUNCHED", "AUTOSTOP"]
    row = next(line for line in table if line.startswith("dev "))
    assert " local " in row and " UP " in row

    clusters = json.loads(_ok(skyhop("status", "--json", env=user_env)).stdout)["items"]
    (dev,) = [c for c in clusters if c["name"] == "dev"]
    assert dev["status"] == "UP" and [j["job_id"] for j in dev["jobs"]] == [1, 2, 3, 4]
    assert [j["status"] for j in dev["jobs"]] == ["SUCCEEDED", "SUCCEEDED", "SUCCEEDED", "FAILED"]

    assert _ok(skyhop("logs", "dev", "3", "--no-follow", env=user_env)).stdout == "2\n"
    assert "hello from" in _ok(skyhop("logs", "dev", "1", env=user_env)).stdout
    assert skyhop("logs", "dev", env=user_env).returncode == 3  # latest job, its exit code
    missing = skyhop("logs", "dev", "99", env=user_env)
    assert missing.returncode == 1 and "no job 99; its jobs are 1..4" in missing.stderr

    server = _ok(skyhop("server", "status", env=user_env)).stdout
    assert f"127.0.0.1:{user_env['SKYHOP_SERVER_PORT']}" in server
    assert f"http://127.0.0.1:{user_env['SKYHOP_UI_PORT']}" in server
    assert "worker_pid" in server and "worker_running  True" in server
    # The worker serves the codec server for this UI: temporal --codec-endpoint shows the launch's input.
    endpoint = next(line.split()[1] for line in server.splitlines() if line.startswith("codec_endpoint"))
    show = subprocess.run(
        [str(Path(SKYHOP_CLI).parent / "temporal"), "workflow", "show", "--address",
         f"127.0.0.1:{user_env['SKYHOP_SERVER_PORT']}", "-w", "cluster:dev", "--detailed",
         "--codec-endpoint", endpoint],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert any(
        line.startswith("input[0].") and line.endswith(": dev") for line in show.stdout.splitlines()
    ), show

    assert "terminated" in _ok(skyhop("down", "dev", "-y", env=user_env)).stderr
    assert "dev " not in _ok(skyhop("status", env=user_env)).stdout
    gone = skyhop("exec", "dev", "echo x", env=user_env)
    assert gone.returncode == 1 and "not found" in gone.stderr


def test_detach_and_ctrl_c_leave_the_job_running(user_env: dict[str, str], tmp_path: Path) -> None:
    marker = tmp_path / "done"
    detached = _ok(skyhop("launch", "-y", "-d", "-c", "bg", f"sleep 2; touch {marker}", env=user_env))
    assert "skyhop logs bg 1" in detached.stderr
    wait_for(marker.exists, 30, "the detached job to finish")

    proc = subprocess.Popen(
        with_signals(
            [SKYHOP_CLI, "exec", "bg", "echo started; sleep 5; echo finished"], default=(signal.SIGINT,)
        ),
        env=user_env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    assert proc.stdout.readline() == "started\n"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert "skyhop logs bg 2" in err and "Traceback" not in err
    # The job was not killed: following its log shows it finish.
    follow = _ok(skyhop("logs", "bg", "2", env=user_env))
    assert follow.stdout == "started\nfinished\n"
    _ok(skyhop("down", "bg", "-y", env=user_env))


def test_bad_input_is_one_line_exit_2_and_starts_nothing(fresh_env: dict[str, str], tmp_path: Path) -> None:
    task = tmp_path / "task.yaml"
    task.write_text("resources:\n  cpu: 4\nrun: echo hi\n")
    cases = [
        (["launch", "-y", str(task)], "resources.cpu: unknown field (did you mean 'cpus'?)"),
        (["launch", "-y", "--cpus", "many", "echo x"], "resources.cpus: cpus must be a positive number"),
        (["launch", "-y", "-c", "Bad_Name", "echo x"], "cluster name 'Bad_Name' is invalid"),
        (["launch", "-y", "--infra", "gpc", "echo x"], "(did you mean 'gcp'?)"),
        (["launch", "-y", str(tmp_path / "nope.yaml")], "cannot read task file"),
    ]
    for args, expected in cases:
        result = skyhop(*args, env=fresh_env)
        assert result.returncode == 2, (args, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and expected in lines[0], (args, result.stderr)
        assert "Traceback" not in result.stderr
    assert not (Path(fresh_env["SKYHOP_HOME"]) / "server").exists()


def test_a_request_no_offering_fits_fails_at_optimize_and_starts_nothing(fresh_env: dict[str, str]) -> None:
    result = skyhop("launch", "-y", "-c", "big", "--cpus", "512+", "echo never", env=fresh_env)
    assert result.returncode == 1
    assert "512+ CPU" in result.stderr and "Traceback" not in result.stderr
    assert not (Path(fresh_env["SKYHOP_HOME"]) / "clusters" / "big").exists()
    assert "big" not in _ok(skyhop("status", env=fresh_env)).stdout


def test_dryrun_prints_the_plan_without_a_server(fresh_env: dict[str, str]) -> None:
    result = _ok(skyhop("launch", "--dryrun", "--infra", "local", "echo x", env=fresh_env))
    assert "local" in result.stdout and "✔" in result.stdout
    assert not (Path(fresh_env["SKYHOP_HOME"]) / "server").exists()


def test_concurrent_first_calls_start_one_server_and_one_worker(fresh_env: dict[str, str]) -> None:
    starts = [
        subprocess.Popen(
            [SKYHOP_CLI, "server", "start"],
            env=fresh_env,
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for _ in range(3)
    ]
    outputs = [p.communicate(timeout=120) for p in starts]
    assert all(p.returncode == 0 for p in starts), outputs
    pids = {line for _, err in outputs for line in err.splitlines() if line.startswith("Worker pid")}
    assert len(pids) == 1
    db = str(Path(fresh_env["SKYHOP_HOME"]) / "server" / "temporal.db")
    servers = [p for p in Path("/proc").glob("[0-9]*/cmdline") if _cmdline_has(p, db)]
    assert len(servers) == 1
    # Its SQLite writes a write-ahead log (cli.embedded._SQLITE_PRAGMAS), not a rollback journal.
    with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as database:
        assert database.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    # Its history service keeps 32,768 workflows' state and 64 MiB of events (cli.embedded._DYNAMIC_CONFIG).
    assert _history_cache_sizes(fresh_env) == {"mutablestate": 32768, "events": 64 * 2**20}
    # Reuse is instant: a second status call starts nothing new.
    started = time.monotonic()
    _ok(skyhop("server", "status", env=fresh_env))
    assert time.monotonic() - started < 10


def _history_cache_sizes(env: dict[str, str]) -> dict[str, float]:
    """The embedded server's history caches' sizes, once it reported them (0 until its first report)."""
    state = json.loads((Path(env["SKYHOP_HOME"]) / "server" / "server.json").read_text())

    def reported() -> dict[str, float]:
        url = f"http://127.0.0.1:{state['metrics_port']}/metrics"
        with urllib.request.urlopen(url, timeout=30) as response:
            lines = response.read().decode().splitlines()
        return {
            line.split('cache_type="')[1].split('"')[0]: float(line.split()[-1])
            for line in lines
            if line.startswith("cache_size{") and 'service_name="history"' in line
        }

    wait_for(lambda: reported().get("mutablestate"), 60, "the server to report its caches")
    return {kind: size for kind, size in reported().items() if kind in ("mutablestate", "events")}


def _cmdline_has(path: Path, text: str) -> bool:
    try:
        return text.encode() in path.read_bytes()
    except OSError:
        return False


def test_logs_during_setup_follow_the_setup_then_the_job(user_env: dict[str, str], tmp_path: Path) -> None:
    go = tmp_path / "go"
    task = tmp_path / "task.yaml"
    setup = f"echo setting up\n  while [ ! -e {go} ]; do sleep 0.1; done\n  echo set up"
    task.write_text(f"setup: |\n  {setup}\nrun: echo ran\n")
    launch = subprocess.Popen(
        [SKYHOP_CLI, "launch", "-y", "-c", "slow", str(task)],
        env=user_env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert launch.stderr is not None
        while "setting up" not in (line := launch.stderr.readline()):
            assert line, "the launch ended before its setup printed"
        logs = subprocess.Popen(
            [SKYHOP_CLI, "logs", "slow"],
            env=user_env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert logs.stdout is not None and logs.stdout.readline() == "setting up\n"
        go.touch()
        out, err = logs.communicate(timeout=120)
        assert logs.returncode == 0, err
        assert out == "set up\nran\n"
        assert launch.wait(120) == 0
    finally:
        go.touch()  # whatever failed, the setup ends and the cluster can be taken down
        launch.kill()
        launch.wait()
    _ok(skyhop("down", "slow", "-y", env=user_env))
