"""skyhop's node-side job runner. Standard library only: it is copied to every node as is.

A job lives in ``<runtime_dir>/jobs/<key>/``: ``spec.json`` (what to run), ``state.json``
(status, pids, exit code, times) and ``run.log`` (stdout and stderr). Jobs run detached from
whoever started them, so a job outlives the worker (and the SSH connection) that started it.
While it runs, what waits for it is a shell (``_WAITER``), not a Python interpreter: a node may
run thousands of jobs.

Starting is idempotent: a start claims the job folder with ``mkdir`` before it runs anything,
so a retried start finds the folder and runs nothing twice.

Usage (on a node)::

    python3 node_runner.py start RUNTIME_DIR KEY < spec.json   # prints "started" or "exists"
    python3 node_runner.py state RUNTIME_DIR KEY                # prints state JSON or null
    python3 node_runner.py watch RUNTIME_DIR < query.json       # several states, and newer keys
    python3 node_runner.py log RUNTIME_DIR KEY OFFSET LIMIT     # raw log bytes
    python3 node_runner.py cancel RUNTIME_DIR KEY
    python3 node_runner.py cancel-all RUNTIME_DIR               # before the folder is removed (and
                                                                # the image its setup kept)
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from typing import Any, NoReturn

STARTING = "STARTING"
RUNNING = "RUNNING"
SUCCEEDED = "SUCCEEDED"
FAILED = "FAILED"
CANCELLED = "CANCELLED"
CONTAINER_SETUP = "setup"
CONTAINER_RUN = "run"
NO_RUNTIME_EXIT = 127
"""A container job's exit code on a node with neither docker nor podman (the shell's "not found")."""
_CLAIM_GRACE_S = 30.0
"""A claimed folder without a state after this long means its waiter died before the job started."""


def job_dir(runtime_dir: str, key: str) -> str:
    """Folder of one job."""
    return os.path.join(runtime_dir, "jobs", key)


def _write_json(path: str, data: dict[str, Any]) -> None:
    """Atomically, and readable by the owner only: a job's spec holds its env values (secrets)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie is dead for our purposes; /proc tells where it exists (read without a file object:
    # a watch hub asks thousands of runners a second).
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
    except OSError:
        return True
    try:
        return os.read(fd, 512).rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True
    finally:
        os.close(fd)


StatesSeen = dict[str, tuple[tuple[int, int, int], dict[str, Any]]]
"""A reader's last parse of each state file, by path, with the file's (inode, mtime, size) then."""


def state_path(runtime_dir: str, key: str) -> str:
    """The job's state file: the key of its parse in a ``StatesSeen``."""
    return os.path.join(job_dir(runtime_dir, key), "state.json")


def _load_state(folder: str, seen: StatesSeen | None = None) -> dict[str, Any]:
    """The state file's record; with ``seen``, parsed again only if the file was replaced since."""
    path = os.path.join(folder, "state.json")
    if seen is not None:
        stat = os.stat(path)
        stamp = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
        known = seen.get(path)
        if known is not None and known[0] == stamp:
            return dict(known[1])
    with open(path) as f:
        state: dict[str, Any] = json.load(f)
    if seen is not None:
        seen[path] = (stamp, dict(state))
    return state


def read_state(runtime_dir: str, key: str, seen: StatesSeen | None = None) -> dict[str, Any] | None:
    """The job's state, or None if it was never started; a vanished runner reads as FAILED.

    The runner records the end before it exits (the exit code in ``exit``, or, for a container
    job, the end in ``state.json``), so a dead runner with neither was killed. A runner seen dead
    may have ended the job just after the first read, so the records are read again once the
    runner is known dead: only that second read can tell a killed runner from a finished job.
    ``seen``: a reader that asks again and again (a watch hub, thousands of runs a second) parses a
    file only when it was replaced.
    """
    folder = job_dir(runtime_dir, key)
    try:
        state = _load_state(folder, seen)
    except FileNotFoundError:
        try:
            claimed_at = os.stat(folder).st_mtime
        except FileNotFoundError:
            return None
        ended = _recorded_end(folder)
        if ended is not None:  # the runner ended before the job could record its start
            return {**ended, "status": FAILED, "error": "the job could not start (see its log)"}
        if time.time() - claimed_at < _CLAIM_GRACE_S:
            return {"status": STARTING}
        return {"status": FAILED, "exit_code": None, "error": "the job runner died before the job started"}
    if state["status"] == RUNNING and not _alive(state["runner_pid"]):
        state = _load_state(folder)
        if state["status"] == RUNNING:
            ended = _recorded_end(folder)
            state.update(ended or {"status": FAILED, "error": "the job runner was killed while the job ran"})
    return state


def _recorded_end(folder: str) -> dict[str, Any] | None:
    """The end the waiter recorded (``_WAITER``): its status, exit code and time; None if none was
    (or a runner killed while it wrote it left no number)."""
    path = os.path.join(folder, "exit")
    try:
        with open(path, "rb") as f:
            exit_code = int(f.read())
        ended_at = os.stat(path).st_mtime
    except (OSError, ValueError):
        return None
    return {"status": _end_status(folder, exit_code), "exit_code": exit_code, "ended_at": ended_at}


def _end_status(folder: str, exit_code: int) -> str:
    if os.path.exists(os.path.join(folder, "cancelled")):
        return CANCELLED
    return SUCCEEDED if exit_code == 0 else FAILED


def watch(
    runtime_dir: str,
    keys: list[str],
    prefix: str,
    newer_than: int | None,
    known: list[str] | None = None,
    seen: StatesSeen | None = None,
) -> dict[str, Any]:
    """The states of ``keys``, and which other ``<prefix><n>`` jobs with ``n > newer_than`` exist
    here (none are looked for if ``newer_than`` is None: the watcher follows only its own).

    Jobs in ``known`` are not reported: the watcher has heard of them already.

    One question per node for every job a watcher follows on it: the second part tells the
    watcher that a job it does not follow yet was started, without reading any job's files.
    """
    newer = [] if newer_than is None else _newer(runtime_dir, keys, prefix, newer_than, known or [])
    states = {key: read_state(runtime_dir, key, seen) for key in keys}
    return {"states": states, "newer": sorted(newer), "present": os.path.isdir(runtime_dir)}


def _newer(runtime_dir: str, keys: list[str], prefix: str, newer_than: int, known: list[str]) -> list[str]:
    try:
        names = os.listdir(os.path.join(runtime_dir, "jobs"))
    except FileNotFoundError:
        names = []
    return [
        name
        for name in names
        if name.startswith(prefix)
        and name[len(prefix) :].isdigit()
        and int(name[len(prefix) :]) > newer_than
        and name not in keys
        and name not in known
    ]


def read_log(runtime_dir: str, key: str, offset: int, limit: int) -> bytes:
    """Up to ``limit`` bytes of the job's log from ``offset`` (a log that did not grow is not opened:
    a watch hub asks thousands a second)."""
    path = os.path.join(job_dir(runtime_dir, key), "run.log")
    try:
        if os.stat(path).st_size <= offset:
            return b""
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read(limit)
    except FileNotFoundError:
        return b""


def stage(runtime_dir: str, key: str, spec: dict[str, Any]) -> str:
    """The job's spec, written (owner-only) where the start's shell (``_DETACH``) claims the job with
    it: the claim, the spec's move into the job's folder and the waiter's start are that shell's,
    which goes on when whoever started it dies (a worker killed mid-start loses no job, and its
    retried start runs none twice). A starter that dies before the shell starts leaves the staged
    file until the node goes."""
    os.makedirs(os.path.join(runtime_dir, "jobs"), exist_ok=True)
    staged = os.path.join(runtime_dir, ".staged")
    os.makedirs(staged, exist_ok=True)
    path = os.path.join(staged, f"{key}.{os.getpid()}.{secrets.token_hex(4)}.json")
    _write_json(path, spec)
    return path


def waiter_argv(runner: str, runtime_dir: str, key: str, staged: str, spec: dict[str, Any]) -> list[str]:
    """The command that claims the job (its folder, with the ``staged`` spec) and runs it under a
    detached waiter, with ``runner`` (this file, as the node holds it) for the job's start and end.

    Run it in a session of its own, with its standard output a pipe read to its end: the end comes
    once the job recorded itself (or failed to), and its standard error holds only its own errors.
    It exits ``EXISTS`` if a start before this one claimed the job.
    """
    ends = "finish" if spec.get("container") else "exit"
    folder = job_dir(runtime_dir, key)
    return [_SHELL, "-c", _DETACH, _SHELL, _WAITER, sys.executable, runner, folder, ends, staged]


def start(runtime_dir: str, key: str, spec: dict[str, Any]) -> str:
    """Claim the job folder and run the job under a detached waiter; "exists" if already claimed."""
    staged = stage(runtime_dir, key, spec)
    detach = subprocess.run(
        waiter_argv(os.path.abspath(__file__), runtime_dir, key, staged, spec),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        start_new_session=True,
    )
    if detach.returncode == EXISTS:
        return "exists"
    if detach.returncode != 0:
        raise OSError(f"starting the job's waiter failed: {detach.stderr.decode(errors='replace').strip()}")
    return "started"


_SHELL = "/bin/sh"
EXISTS = 3
"""``_DETACH``'s exit code when the job's folder was claimed before: the job runs once."""
_DETACH = """
if ! mkdir "$4" 2>/dev/null; then
    rm -f "$6"
    [ -d "$4" ] && exit 3
    echo "cannot create the job's folder $4" >&2
    exit 1
fi
mv "$6" "$4/spec.json" || exit 1
exec 3>&1 >/dev/null
"$0" -c "$1" skyhop-job "$2" "$3" "$4" "$5" 2>/dev/null &
"""
"""Claim the job (``mkdir``), move its staged spec in, start the waiter in the background and exit,
so the waiter is no child of whoever started it: the starter's death (a worker's, a closed SSH
channel) does not reach it, and no one has to reap it. The starter's pipe becomes the waiter's file
descriptor 3, open until the job recorded itself (``run-job`` closes it), then its end tells the
starter that a cancel finds what to stop. Started by skyhop's worker for a node in its own process
(``local``, ``sim``), this costs a shell where a Python interpreter per job start took about 42 ms
of the machine's CPU (``benchmarks/job_start.py``)."""
_WAITER = """
"$1" -I -S "$2" run-job "$3" 3 </dev/null >>"$3/run.log" 2>&1 &
job=$!
exec 3>&-
forwarded=
trap 'forwarded=1; kill -TERM -"$job" 2>/dev/null || kill -TERM "$job" 2>/dev/null' TERM
wait "$job"
code=$?
while [ -n "$forwarded" ]; do
    forwarded=
    wait "$job"
    code=$?
done
[ "$4" = finish ] && exec "$1" -I -S "$2" finish "$3" "$code"
echo "$code" >"$3/exit"
"""
"""The job's waiter, a POSIX shell for as long as the job runs: about 0.1 MB of memory of its own
(PSS), where a waiting Python interpreter took 6 (``benchmarks/node_runner_memory.py``). Its pid
is the runner's: it starts the job (``run-job``, which records it and becomes ``bash``), forwards
a SIGTERM to the job's group, and once the job ends records the end before it exits, so the
runner lives until the end record is written: the exit code in ``exit`` (``read_state`` makes the
end of it), or, for a container job, by becoming ``finish``, which removes the container first.
Without a Python interpreter per end, cancelling 2,000 jobs starts no 2,000 processes. A ``wait``
that a trapped signal interrupted is waited again: only a completed one has the code.
"""


def _run_job(folder: str, ready_fd: int | None) -> NoReturn:
    """Become the job: in a session of its own, recorded RUNNING before it runs anything.

    The record comes first so that whoever can read the job can also stop it: if the node's folder
    went before the job recorded itself (its machine was terminated, and the cancel that came with
    it found no state), this raises and the script never runs.
    """
    os.setsid()
    # A shell leaves SIGINT and SIGQUIT ignored to a background command, Python ignores SIGPIPE and
    # SIGXFSZ, a worker started under nohup ignores SIGHUP: a job starts with none ignored.
    for signum in signal.valid_signals():
        if signal.getsignal(signum) == signal.SIG_IGN:
            signal.signal(signum, signal.SIG_DFL)
    with open(os.path.join(folder, "spec.json")) as f:
        spec = json.load(f)
    env = dict(os.environ)
    env.update(spec.get("env") or {})
    env.setdefault("PYTHONUNBUFFERED", "1")
    cwd = spec.get("cwd") or folder
    os.makedirs(cwd, exist_ok=True)
    state: dict[str, Any] = {
        "status": RUNNING, "pid": os.getpid(), "runner_pid": os.getppid(), "started_at": time.time()
    }  # fmt: skip
    argv = ["bash", "-c", spec["script"]]
    container = spec.get("container")
    if container:
        runtime = container_runtime(env)
        if runtime is None:
            state["error"] = no_runtime_error(container["image"])
            _write_json(os.path.join(folder, "state.json"), state)
            print(state["error"], file=sys.stderr, flush=True)
            os._exit(NO_RUNTIME_EXIT)
        image = container["image"]
        kept = node_image(_runtime_dir(folder))
        if container["stage"] == CONTAINER_RUN and _image_exists(runtime, kept):
            image = kept
        name = container_name(folder)
        state.update(container=name, container_runtime=runtime, container_stage=container["stage"])
        home = env.get("HOME") or os.path.expanduser("~")
        names = sorted({*(spec.get("env") or {}), "HOME"})
        argv = container_argv(runtime, name, image, spec["script"], names, home, cwd, container)
    _write_json(os.path.join(folder, "state.json"), state)
    if ready_fd is not None:
        os.close(ready_fd)
    os.chdir(cwd)
    os.execvpe(argv[0], argv, env)


def container_runtime(environ: dict[str, str]) -> str | None:
    """docker when its daemon can be reached, else podman (which has none), else None.

    A docker client without its daemon is common (a client-only install, a stopped service):
    podman, when present, runs the job instead of a launch failing on the missing daemon.
    """
    docker = shutil.which("docker", path=environ.get("PATH"))
    runtime_dir = environ.get("XDG_RUNTIME_DIR")
    sockets = ["/var/run/docker.sock"] + ([os.path.join(runtime_dir, "docker.sock")] if runtime_dir else [])
    if docker and (environ.get("DOCKER_HOST") or any(os.path.exists(s) for s in sockets)):
        return docker
    return shutil.which("podman", path=environ.get("PATH"))


def no_runtime_error(image: str) -> str:
    """Why a container job cannot run on this node, and what to do."""
    return (
        f"image_id docker:{image} needs docker (with its daemon running) or podman on the node, and it "
        "has neither: install one there (Debian: apt-get install podman), or give a machine image"
    )


def container_name(folder: str) -> str:
    """The container of the job in ``folder``: one per job, so that ``_finish`` removes it by name."""
    return "skyhop-" + hashlib.sha256(os.path.abspath(folder).encode()).hexdigest()[:20]


def node_image(runtime_dir: str) -> str:
    """The image a node keeps once its setup container succeeded (one per node: its runtime folder)."""
    return "localhost/skyhop-node:" + hashlib.sha256(os.path.abspath(runtime_dir).encode()).hexdigest()[:20]


_NODE_IMAGE_RECORD = "node_image.json"
"""In the runtime folder: which runtime holds the node's kept image, so that it can be removed."""


def remove_node_image(runtime_dir: str) -> None:
    """Remove the image the node's setup kept, before the node's folder goes (nothing else names it)."""
    record_path = os.path.join(runtime_dir, _NODE_IMAGE_RECORD)
    try:
        with open(record_path) as f:
            record = json.load(f)
    except (OSError, ValueError):
        return
    subprocess.run([record["runtime"], "rmi", "-f", record["image"]], capture_output=True, check=False)
    with contextlib.suppress(OSError):
        os.remove(record_path)


def _runtime_dir(folder: str) -> str:
    return os.path.dirname(os.path.dirname(os.path.abspath(folder)))


def container_argv(
    runtime: str,
    name: str,
    image: str,
    script: str,
    env_names: list[str],
    home: str,
    cwd: str,
    container: dict[str, Any],
) -> list[str]:
    """The ``docker run``/``podman run`` command of a job, as SkyPilot runs a task in its container.

    The image's entrypoint is replaced by ``bash`` (SkyPilot's requirement of an image), the network
    and IPC are the host's (ports, NCCL, shared memory as without a container), envs are passed by
    name (their values stay off the command line), and the home, the working folder and each bind
    are mounted at the same paths. The task's ``run_options`` come after these, as SkyPilot adds its
    user's to its own.
    """
    argv = [runtime, "run", "--name", name, "--network", "host", "--ipc", "host", "--entrypoint", "bash"]
    binds = [home] + [p for p in (cwd, *container.get("binds", [])) if not _inside(p, home)]
    for path in dict.fromkeys(binds):
        argv += ["-v", f"{path}:{path}"]
    for env_name in env_names:
        argv += ["-e", env_name]
    if container.get("gpus"):
        docker = os.path.basename(runtime) == "docker"
        argv += ["--gpus", "all"] if docker else ["--device", "nvidia.com/gpu=all"]
    return [*argv, *container.get("run_options", []), "-w", cwd, image, "-c", script]


def _inside(path: str, folder: str) -> bool:
    return os.path.commonpath([os.path.abspath(path), os.path.abspath(folder)]) == os.path.abspath(folder)


def _image_exists(runtime: str, image: str) -> bool:
    done = subprocess.run([runtime, "image", "inspect", image], capture_output=True, check=False)
    return done.returncode == 0


def _end_container(state: dict[str, Any], folder: str, exit_code: int) -> int:
    """Keep a succeeded setup's container as the node's image, then remove the job's container.

    Removal is here, not ``run --rm``: a container whose client was killed (a cancel's SIGKILL)
    would run on; ``rm -f`` stops it. Returns the job's exit code (1 when keeping the image failed).
    """
    runtime, name = state["container_runtime"], state["container"]
    if exit_code == 0 and state.get("container_stage") == CONTAINER_SETUP:
        runtime_dir = _runtime_dir(folder)
        image = node_image(runtime_dir)
        kept = subprocess.run([runtime, "commit", name, image], capture_output=True, check=False)
        if kept.returncode != 0:
            lines = kept.stderr.decode(errors="replace").strip().splitlines() or ["no output"]
            state["error"] = f"keeping the set-up container as the node's image failed: {lines[-1]}"
            exit_code = 1
        else:
            _write_json(os.path.join(runtime_dir, _NODE_IMAGE_RECORD), {"runtime": runtime, "image": image})
    subprocess.run([runtime, "rm", "-f", name], capture_output=True, check=False)
    return exit_code


def _finish(folder: str, exit_code: int) -> None:
    """Record the job's end; a job that could not record its start is recorded as failed to start.

    ``exit_code`` is the shell's: 128 + N for a job that a signal N ended.
    """
    try:
        state = _load_state(folder)
    except (OSError, ValueError):
        state = {"runner_pid": os.getpid(), "error": "the job could not start (see its log)"}
    if state.get("container"):
        exit_code = _end_container(state, folder, exit_code)
    state.update(status=_end_status(folder, exit_code), exit_code=exit_code, ended_at=time.time())
    with contextlib.suppress(OSError):  # the node's folder went: there is no one to tell
        _write_json(os.path.join(folder, "state.json"), state)


def _kill_group(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signum)


def cancel(runtime_dir: str, key: str, grace_s: float = 5.0) -> None:
    """SIGTERM the job's process group, then SIGKILL it after ``grace_s``."""
    _cancel(runtime_dir, [key], grace_s)


def cancel_all(runtime_dir: str, grace_s: float = 5.0) -> None:
    """Cancel every job still running in ``runtime_dir``, all within one grace period."""
    try:
        keys = os.listdir(os.path.join(runtime_dir, "jobs"))
    except FileNotFoundError:
        return
    _cancel(runtime_dir, keys, grace_s)


def _cancel(runtime_dir: str, keys: list[str], grace_s: float) -> None:
    pids = []
    for key in keys:
        state = read_state(runtime_dir, key)
        if state is None or state.get("status") != RUNNING:
            continue
        open(os.path.join(job_dir(runtime_dir, key), "cancelled"), "w").close()
        _kill_group(state["pid"], signal.SIGTERM)
        pids.append(state["pid"])
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
        time.sleep(0.05)
    for pid in pids:
        _kill_group(pid, signal.SIGKILL)


def main(argv: list[str]) -> int:
    """Entry point when run on a node."""
    if argv[1:2] == ["cancel-all"]:
        cancel_all(argv[2])
        remove_node_image(argv[2])
        return 0
    if argv[1:2] == ["run-job"]:
        _run_job(argv[2], int(argv[3]) if len(argv) > 3 else None)
    if argv[1:2] == ["finish"]:
        _finish(argv[2], int(argv[3]))
        return 0
    if argv[1:2] == ["watch"]:
        query = json.load(sys.stdin)
        report = watch(argv[2], query["keys"], query["prefix"], query["newer_than"], query.get("known"))
        print(json.dumps(report))
        return 0
    command, runtime_dir, key = argv[1], argv[2], argv[3]
    if command == "start":
        # A shell traps only what it was not started ignoring: the waiter must be able to forward it.
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        print(start(runtime_dir, key, json.load(sys.stdin)), flush=True)
    elif command == "state":
        print(json.dumps(read_state(runtime_dir, key)))
    elif command == "log":
        sys.stdout.buffer.write(read_log(runtime_dir, key, int(argv[4]), int(argv[5])))
    elif command == "cancel":
        cancel(runtime_dir, key)
    else:
        print(f"unknown command {command!r}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
