"""The node-side runner: detached jobs, idempotent start, state and logs in files, cancel."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from skyhop.providers.runtime import node_runner
from tests.helpers import fake_container_runtime, group_members, wait_for, with_signals


def _state(root: Path, key: str) -> dict:  # type: ignore[type-arg]
    state = node_runner.read_state(str(root), key)
    assert state is not None
    return state


def _run_cli(root: Path, key: str, script: str, ignoring: tuple[signal.Signals, ...] = ()) -> str:
    """Start through the runner's command line, as the local and SSH runtimes do, from a process
    that ignores ``ignoring`` (as one started under ``nohup`` ignores SIGHUP)."""

    argv = with_signals([sys.executable, node_runner.__file__, "start", str(root), key], ignore=ignoring)
    out = subprocess.run(
        argv,
        input=json.dumps({"script": script, "cwd": str(root)}),
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def test_a_job_runs_detached_and_records_status_exit_code_and_log(tmp_path: Path) -> None:
    assert _run_cli(tmp_path, "job-1", 'echo "out $X"; echo err >&2; exit 7') == "started"
    wait_for(lambda: _state(tmp_path, "job-1")["status"] == "FAILED", 10, "the job to end")
    state = _state(tmp_path, "job-1")
    assert state["exit_code"] == 7
    assert node_runner.read_log(str(tmp_path), "job-1", 0, 1000) == b"out \nerr\n"
    assert node_runner.read_log(str(tmp_path), "job-1", 4, 1000) == b"\nerr\n"


def test_starting_the_same_key_twice_runs_it_once(tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    assert _run_cli(tmp_path, "k", f"echo once >> {marks}") == "started"
    assert _run_cli(tmp_path, "k", f"echo once >> {marks}") == "exists"
    wait_for(lambda: _state(tmp_path, "k")["status"] == "SUCCEEDED", 10, "the job")
    assert marks.read_text() == "once\n"


def test_a_starter_that_died_after_staging_the_spec_left_the_job_to_its_retry(tmp_path: Path) -> None:
    """The claim is the start's shell's, not the starter's: a worker killed between writing the spec
    and spawning the shell claimed nothing, so its retried start runs the job (once)."""
    marks = tmp_path / "marks"
    node_runner.stage(str(tmp_path), "k", {"script": f"echo once >> {marks}", "cwd": str(tmp_path)})
    assert _run_cli(tmp_path, "k", f"echo once >> {marks}") == "started"
    wait_for(lambda: _state(tmp_path, "k")["status"] == "SUCCEEDED", 10, "the job")
    assert marks.read_text() == "once\n"


def test_start_answers_once_the_job_is_recorded_so_a_cancel_right_after_stops_it(tmp_path: Path) -> None:
    for i in range(5):
        assert _run_cli(tmp_path, f"quick-{i}", "sleep 300") == "started"
        state = _state(tmp_path, f"quick-{i}")
        assert state["status"] == "RUNNING", state
        node_runner.cancel(str(tmp_path), f"quick-{i}", grace_s=2)
        wait_for(lambda: _state(tmp_path, f"quick-{i}")["status"] == "CANCELLED", 10, "the cancel")  # noqa: B023
        wait_for(lambda: not group_members(state["pid"]), 5, "the job's processes to exit")  # noqa: B023


def test_cancel_stops_the_whole_process_group(tmp_path: Path) -> None:
    _run_cli(tmp_path, "long", "sleep 300 & sleep 300; wait")
    wait_for(lambda: _state(tmp_path, "long").get("pid"), 10, "the job to run")
    pid = _state(tmp_path, "long")["pid"]
    node_runner.cancel(str(tmp_path), "long", grace_s=2)
    wait_for(lambda: _state(tmp_path, "long")["status"] == "CANCELLED", 10, "the cancel")
    wait_for(lambda: not group_members(pid), 5, "the job's processes to exit")


def test_a_job_whose_node_folder_goes_as_it_starts_does_not_outlive_it(tmp_path: Path) -> None:
    """A node terminated (its folder moved away, as the sim does) between the job's start and its
    first state: the terminate's cancel found no pid to stop, so the job must not run at all.

    The job's side of the runner runs in a process of its own (it becomes the job), with its state
    write made to move the node away first."""
    folder = Path(node_runner.job_dir(str(tmp_path / "node"), "k"))
    folder.mkdir(parents=True)
    marker = tmp_path / "ran"
    (folder / "spec.json").write_text(
        json.dumps({"script": f"touch {marker}; sleep 300", "cwd": str(tmp_path)})
    )
    program = f"""
import os, sys
sys.path.insert(0, {os.path.dirname(node_runner.__file__)!r})
import node_runner
write = node_runner._write_json
def node_goes_first(path, data):
    os.rename({str(tmp_path / "node")!r}, {str(tmp_path / "node.terminated")!r})
    write(path, data)
node_runner._write_json = node_goes_first
node_runner.main(["node_runner", "run-job", {str(folder)!r}])
"""
    job = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert job.returncode != 0 and "FileNotFoundError" in job.stderr, job.stderr
    assert not marker.exists()
    assert not (tmp_path / "node.terminated" / "jobs" / "k" / "state.json").exists()


def test_what_waits_for_a_running_job_is_a_shell_not_a_python_interpreter(tmp_path: Path) -> None:
    """10,000 jobs on one machine: a waiting Python interpreter cost ~6 MB each."""
    _run_cli(tmp_path, "w", "sleep 300")
    wait_for(lambda: _state(tmp_path, "w").get("pid"), 10, "the job to run")
    state = _state(tmp_path, "w")
    try:
        waiter = os.path.realpath(f"/proc/{state['runner_pid']}/exe")
        assert "python" not in os.path.basename(waiter), waiter
        status = dict(
            line.split(":", 1)
            for line in Path(f"/proc/{state['runner_pid']}/status").read_text().splitlines()
        )
        assert int(status["VmRSS"].split()[0]) < 3 * 1024, status["VmRSS"]
    finally:
        node_runner.cancel(str(tmp_path), "w", grace_s=2)
    wait_for(lambda: _state(tmp_path, "w")["status"] == "CANCELLED", 10, "the cancel")


def test_a_sigterm_to_the_runner_reaches_the_job_and_its_end_is_recorded(tmp_path: Path) -> None:
    _run_cli(tmp_path, "t", "sleep 300 & sleep 300; wait")
    wait_for(lambda: _state(tmp_path, "t").get("pid"), 10, "the job to run")
    state = _state(tmp_path, "t")
    os.kill(state["runner_pid"], signal.SIGTERM)
    wait_for(lambda: _state(tmp_path, "t")["status"] == "FAILED", 10, "the job to end")
    ended = _state(tmp_path, "t")
    assert ended["exit_code"] == 128 + signal.SIGTERM and "error" not in ended
    assert {"pid", "runner_pid", "started_at", "ended_at"} <= set(ended)
    wait_for(lambda: not group_members(state["pid"]), 10, "the job's processes to exit")


def test_a_jobs_end_is_recorded_by_its_waiter_without_a_python_interpreter(tmp_path: Path) -> None:
    """Cancelling 2,000 jobs must not start 2,000 interpreters: the waiter writes the exit code,
    the state file keeps the start record, and the reader makes the end of both."""
    _run_cli(tmp_path, "c", "sleep 300")
    wait_for(lambda: _state(tmp_path, "c").get("pid"), 10, "the job to run")
    node_runner.cancel(str(tmp_path), "c", grace_s=2)
    wait_for(lambda: _state(tmp_path, "c")["status"] == "CANCELLED", 10, "the cancel")
    folder = tmp_path / "jobs" / "c"
    assert json.loads((folder / "state.json").read_text())["status"] == "RUNNING"
    assert (folder / "exit").read_text() == f"{128 + signal.SIGTERM}\n"
    ended = _state(tmp_path, "c")
    assert ended["exit_code"] == 128 + signal.SIGTERM and ended["ended_at"] >= ended["started_at"]


def test_a_job_that_could_not_record_its_start_reads_as_failed_to_start(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, node_runner.__file__, "start", str(tmp_path), "nostart"],
        input=json.dumps({"script": "true", "cwd": "/proc/no-such-folder"}),
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert out.stdout.strip() == "started"
    wait_for(lambda: _state(tmp_path, "nostart")["status"] == "FAILED", 10, "the failure")
    state = _state(tmp_path, "nostart")
    assert state["error"] == "the job could not start (see its log)" and state["exit_code"] == 1
    assert b"/proc/no-such-folder" in node_runner.read_log(str(tmp_path), "nostart", 0, 10_000)


def test_a_job_starts_with_no_signal_ignored(tmp_path: Path) -> None:
    """A shell starts a background command with SIGINT and SIGQUIT ignored, Python ignores SIGPIPE,
    ``nohup`` SIGHUP: a job inherits none of them."""
    _run_cli(tmp_path, "sig", "exec grep SigIgn /proc/self/status", ignoring=(signal.SIGHUP, signal.SIGUSR1))
    wait_for(lambda: _state(tmp_path, "sig")["status"] == "SUCCEEDED", 10, "the job")
    assert node_runner.read_log(str(tmp_path), "sig", 0, 1000).split() == [b"SigIgn:", b"0" * 16]


def test_a_killed_runner_reads_as_failed_not_running(tmp_path: Path) -> None:
    _run_cli(tmp_path, "orphan", "sleep 300")
    wait_for(lambda: _state(tmp_path, "orphan").get("pid"), 10, "the job to run")
    state = _state(tmp_path, "orphan")
    os.kill(state["runner_pid"], signal.SIGKILL)
    os.killpg(state["pid"], signal.SIGKILL)
    wait_for(lambda: _state(tmp_path, "orphan")["status"] == "FAILED", 10, "the failure")
    assert "killed" in _state(tmp_path, "orphan")["error"]


def test_unknown_job_has_no_state(tmp_path: Path) -> None:
    assert node_runner.read_state(str(tmp_path), "nope") is None
    assert node_runner.read_log(str(tmp_path), "nope", 0, 10) == b""


def test_a_job_that_ends_between_the_state_read_and_the_liveness_check_reads_as_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The interleaving, forced for 50 jobs: the reader finds RUNNING in the state file, then the
    job ends, then the reader asks whether the runner is alive: it is not, yet nothing was killed."""
    real_alive = node_runner._alive
    keys = [f"race-{i}" for i in range(50)]
    starts = [
        subprocess.Popen(
            [sys.executable, node_runner.__file__, "start", str(tmp_path), key],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
        )
        for key in keys
    ]
    for key, start in zip(keys, starts, strict=True):
        os.mkfifo(tmp_path / f"{key}.go")
        script = f"cat {tmp_path / key}.go > /dev/null"  # ends (exit 0) once the test closes the pipe
        start.communicate(json.dumps({"script": script, "cwd": str(tmp_path)}), timeout=60)
    wait_for(lambda: all(_state(tmp_path, key).get("pid") for key in keys), 60, "every job to run")
    key_of_runner = {_state(tmp_path, key)["runner_pid"]: key for key in keys}

    def alive_once_the_job_ended(pid: int) -> bool:
        os.close(os.open(tmp_path / f"{key_of_runner[pid]}.go", os.O_WRONLY))
        wait_for(lambda: not real_alive(pid), 30, f"{key_of_runner[pid]}'s runner to exit")
        return real_alive(pid)

    monkeypatch.setattr(node_runner, "_alive", alive_once_the_job_ended)
    states = [_state(tmp_path, key) for key in keys]
    assert [(s["status"], s.get("exit_code")) for s in states] == [("SUCCEEDED", 0)] * 50


def test_watch_answers_for_several_jobs_and_names_only_new_ones_through_the_command_line(
    tmp_path: Path,
) -> None:
    for key, script in (("job-1", "exit 3"), ("job-2", "sleep 30"), ("job-3", "true"), ("setup-x", "true")):
        assert _run_cli(tmp_path, key, script) == "started"
    wait_for(lambda: _state(tmp_path, "job-1")["status"] == "FAILED", 10, "job 1 to end")
    query = {"keys": ["job-1", "job-9"], "prefix": "job-", "newer_than": 1, "known": ["job-3"]}
    out = subprocess.run(
        [sys.executable, node_runner.__file__, "watch", str(tmp_path)],
        input=json.dumps(query), capture_output=True, text=True, check=True,
    )  # fmt: skip
    report = json.loads(out.stdout)
    assert report["states"]["job-1"]["exit_code"] == 3 and report["states"]["job-9"] is None
    assert report["newer"] == ["job-2"] and report["present"] is True  # not job-3 (known), nor setups
    node_runner.cancel(str(tmp_path), "job-2", grace_s=0.0)
    gone = node_runner.watch(str(tmp_path / "removed"), ["job-1"], "job-", 0)
    assert gone == {"states": {"job-1": None}, "newer": [], "present": False}


def _start_container_job(root: Path, key: str, script: str, stage: str, path: str, **env: str) -> None:
    """Start ``script`` as a container job through the runner's command line."""
    container = {"image": "ubuntu:20.04", "stage": stage, "binds": ["/data"], "gpus": False}
    spec = {"script": script, "cwd": str(root / "workdir"), "container": container}
    spec["env"] = {"HOME": str(root), "PATH": path, **env}
    subprocess.run(
        [sys.executable, node_runner.__file__, "start", str(root), key],
        input=json.dumps(spec), capture_output=True, text=True, check=True,
    )  # fmt: skip


def _container_job(root: Path, key: str, script: str, stage: str, path: str, **env: str) -> dict:  # type: ignore[type-arg]
    """Run ``script`` in a container job until it ends; its end state."""
    _start_container_job(root, key, script, stage, path, **env)
    wait_for(lambda: _state(root, key)["status"] in ("SUCCEEDED", "FAILED"), 20, f"{key} to end")
    return _state(root, key)


def test_a_container_job_runs_in_the_image_and_the_set_up_container_becomes_the_nodes_image(
    tmp_path: Path,
) -> None:
    calls = fake_container_runtime(tmp_path / "bin")
    node = tmp_path / "node"
    path = str(tmp_path / "bin")
    setup = _container_job(node, "setup", 'echo "setup in $CONTAINER_IMAGE"', "setup", path)
    job = _container_job(
        node, "job-1", 'echo "run in $CONTAINER_IMAGE $TOKEN $(pwd)"', "run", path, TOKEN="t1"
    )
    assert setup["status"] == job["status"] == "SUCCEEDED"
    assert node_runner.read_log(str(node), "setup", 0, 1000) == b"setup in ubuntu:20.04\n"
    kept = node_runner.node_image(str(node))
    assert node_runner.read_log(str(node), "job-1", 0, 1000).decode().split() == [
        "run", "in", kept, "t1", str(node / "workdir")
    ]  # fmt: skip
    made = [json.loads(line) for line in calls.read_text().splitlines()]
    run_call = next(c for c in made if c[0] == "run" and "TOKEN" in c)
    name = run_call[run_call.index("--name") + 1]
    assert ["-v", f"{node}:{node}"] == run_call[run_call.index("-v") : run_call.index("-v") + 2]
    assert "-v" in run_call and "/data:/data" in run_call and "t1" not in " ".join(run_call)
    assert ["commit", node_runner.container_name(str(node / "jobs" / "setup")), kept] in made
    assert ["rm", "-f", name] in made  # removed by the runner once it ended, not left to run
    subprocess.run([sys.executable, node_runner.__file__, "cancel-all", str(node)], check=True)
    assert ["rmi", "-f", kept] == json.loads(calls.read_text().splitlines()[-1])  # before the folder goes


def test_a_container_job_on_a_node_without_docker_or_podman_fails_saying_so(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    state = _container_job(tmp_path / "node", "setup", "true", "setup", str(tmp_path / "empty"))
    assert state["status"] == "FAILED" and state["exit_code"] == node_runner.NO_RUNTIME_EXIT
    assert state["error"] == node_runner.no_runtime_error("ubuntu:20.04")
    assert "needs docker (with its daemon running) or podman" in state["error"]


def test_the_container_runtime_is_docker_only_where_its_daemon_answers_and_gpus_pass_through(
    tmp_path: Path,
) -> None:
    for name in ("docker", "podman"):
        (tmp_path / name).write_text("#!/bin/sh\n")
        (tmp_path / name).chmod(0o755)
    path = str(tmp_path)
    assert node_runner.container_runtime({"PATH": path}) == str(tmp_path / "podman")
    assert node_runner.container_runtime({"PATH": path, "DOCKER_HOST": "tcp://h:2375"}) == str(
        tmp_path / "docker"
    )
    gpus = {"gpus": True}
    docker = node_runner.container_argv("/x/docker", "n", "img", "s", [], "/h", "/h/w", gpus)
    podman = node_runner.container_argv("/x/podman", "n", "img", "s", [], "/h", "/w", gpus)
    assert docker[docker.index("--gpus") + 1] == "all" and docker.count("-v") == 1
    assert podman[podman.index("--device") + 1] == "nvidia.com/gpu=all" and "/w:/w" in podman
    assert podman[-5:] == ["-w", "/w", "img", "-c", "s"]


def test_a_cancelled_container_job_has_its_container_removed(tmp_path: Path) -> None:
    calls = fake_container_runtime(tmp_path / "bin")
    (tmp_path / "bin" / "sleep").symlink_to(shutil.which("sleep") or "/bin/sleep")
    node = tmp_path / "node"
    _start_container_job(node, "job-1", "sleep 300", "run", str(tmp_path / "bin"))
    wait_for(lambda: _state(node, "job-1").get("container"), 10, "the job to run")
    node_runner.cancel(str(node), "job-1", grace_s=2)
    wait_for(lambda: _state(node, "job-1")["status"] == "CANCELLED", 10, "the cancel")
    name = node_runner.container_name(str(node / "jobs" / "job-1"))
    assert ["rm", "-f", name] in [json.loads(line) for line in calls.read_text().splitlines()]
