"""Processes the tests (and the benchmarks) start themselves, stopped by pid: a Temporal dev server,
skyhop workers, and embedded skyhops with a HOME and ports of their own."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

from skyhop.cli.embedded import (
    ServerError,
    dev_server_argv,
    free_port,
    start_dev_server,
    worker_argv,
)

__all__ = [
    "SKYHOP_CLI",
    "DevServer",
    "cli_imports",
    "WorkerProcess",
    "embedded_env",
    "embedded_skyhop",
    "descendants",
    "free_port",
    "group_members",
    "kill_leftover_jobs",
    "stop_embedded",
    "wait_for",
]

SKYHOP_CLI = str(Path(sys.executable).parent / "skyhop")
"""The ``skyhop`` command installed next to this interpreter."""


def wait_for(predicate: Callable[[], object], timeout: float = 30.0, what: str = "condition") -> None:
    """Poll ``predicate`` until it is truthy; fail the test with ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def cli_imports(*args: str) -> set[str]:
    """Every module ``skyhop ARGS`` imports (``python -X importtime``), run from the repository's
    root (examples' paths are relative to it); the command must succeed."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "skyhop.cli", *args],
        cwd=Path(__file__).resolve().parent.parent, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    return {line.split("|")[-1].strip() for line in result.stderr.splitlines() if "|" in line}


async def until_true(check: Callable[[], Awaitable[bool]], what: str, timeout: float = 60) -> None:
    """Await ``check`` until it is true; fail the test with ``what`` after ``timeout`` (``wait_for``'s
    twin for an event loop's checks)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await check():
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.2)


def with_signals(
    argv: list[str], *, default: tuple[int, ...] = (), ignore: tuple[int, ...] = ()
) -> list[str]:
    """``argv`` started with ``default`` signals at their default action and ``ignore`` ignored.

    A disposition set this way survives the exec, as ``nohup`` relies on. It is set in a small
    Python that then execs ``argv``, not in a ``preexec_fn``: a test process has threads (the
    SDK's), and a child forked from it that runs Python code before its exec may abort. ``default``
    undoes an ignored SIGINT this suite may have inherited (a CI runner backgrounds its steps), in
    which case Python installs no KeyboardInterrupt handler and Ctrl-C would not reach the command.
    """
    sets = [f"signal.signal({int(s)}, signal.SIG_DFL)" for s in default]
    sets += [f"signal.signal({int(s)}, signal.SIG_IGN)" for s in ignore]
    script = "; ".join(["import os, signal, sys", *sets, "os.execvp(sys.argv[1], sys.argv[1:])"])
    return [sys.executable, "-c", script, *argv]


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes in process group ``pgid``."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(stat.parent.name))
    return members


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (children, theirs, ...), read from ``/proc``."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
    found, frontier = [], [pid]
    while frontier:
        children = [child for child, parent in parents.items() if parent in frontier]
        found += children
        frontier = children
    return found


def _stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


_PORT_ATTEMPTS = 3


class DevServer:
    """``temporal server start-dev`` on free loopback ports, hardened exactly as the embedded default;
    or on a test machine (``netns``, the network namespace it runs in; ``ip``, its address there). In
    its own namespace it listens on every address of that machine: its services reach each other on
    its loopback, which a server bound to one address does not listen on."""

    def __init__(self, folder: Path, *, ip: str = "127.0.0.1", netns: str | None = None) -> None:
        self.folder = folder
        self.ip, self.netns = ip, netns
        self._choose_ports()
        self.db_file = folder / "temporal.db"
        self.proc: subprocess.Popen[bytes] | None = None

    def _choose_ports(self) -> None:
        self.port = free_port()
        self.ui_port = free_port(self.port)
        self.http_port = free_port(self.port, self.ui_port)
        self.metrics_port = free_port(self.port, self.ui_port, self.http_port)

    @property
    def address(self) -> str:
        return f"{self.ip}:{self.port}"

    def start(self) -> None:
        """Start it; on new ports if one was taken before it bound it (four test sessions start
        servers at once, and each server picks ports of its own for its services: a CI run lost one
        session's server to that, and every test of that session with it)."""
        for attempt in range(_PORT_ATTEMPTS):
            argv = dev_server_argv(
                port=self.port,
                ui_port=self.ui_port,
                http_port=self.http_port,
                metrics_port=self.metrics_port,
                db_file=self.db_file,
                ip="0.0.0.0" if self.netns else self.ip,
            )
            inside = ["ip", "netns", "exec", self.netns] if self.netns else []
            try:
                self.proc = start_dev_server([*inside, *argv], self.folder / "temporal.log")
                return
            except ServerError as exc:
                if "address already in use" not in str(exc) or attempt == _PORT_ATTEMPTS - 1:
                    raise
                self._choose_ports()

    def stop(self) -> None:
        if self.proc is not None:
            _stop(self.proc)
            self.proc = None


class WorkerProcess:
    """A real worker process (``python -m cli.worker_process``) pointed at a server."""

    def __init__(
        self, address: str, folder: Path, env: dict[str, str] | None = None, *, netns: str | None = None
    ) -> None:
        self.address = address
        self.folder = folder
        self.env = env or {}
        """Variables that differ from this process's (another machine's SKYHOP_HOME, host id)."""
        self.netns = netns
        """A test machine's network namespace to run in (the multi-machine test)."""
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        ready = self.folder / f"worker-{time.monotonic_ns()}.ready"
        log = open(self.folder / "worker.log", "ab")  # noqa: SIM115 - lives as long as the process
        env = {**os.environ, **self.env, "SKYHOP_TEMPORAL_ADDRESS": self.address}
        inside = ["ip", "netns", "exec", self.netns] if self.netns else []
        self.proc = subprocess.Popen(
            [*inside, *worker_argv(self.address, ready)],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
        )  # fmt: skip
        wait_for(
            lambda: ready.exists() or self.proc is None or self.proc.poll() is not None, 60, "the worker"
        )
        assert self.proc.poll() is None, f"worker exited: {(self.folder / 'worker.log').read_text()[-2000:]}"

    def freeze(self) -> None:
        """Stop the worker (SIGSTOP) with its polls open: the server still hands it tasks, which stall."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        """Let a frozen worker go on (SIGCONT): it works off what the server handed it meanwhile."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def kill9(self) -> None:
        """Kill the worker the hard way: no shutdown, in-flight activities are abandoned."""
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait()
        self.proc = None

    def stop(self) -> None:
        if self.proc is not None:
            _stop(self.proc)
            self.proc = None


def kill_leftover_jobs(home: Path) -> None:
    """Stop job processes that tests left running on local nodes (by the pids their runners recorded)."""
    for state_file in home.glob("clusters/*/node-*/jobs/*/state.json"):
        try:
            state = json.loads(state_file.read_text())
        except (OSError, ValueError):
            continue
        if state.get("status") == "RUNNING":
            with contextlib.suppress(ProcessLookupError, PermissionError, TypeError):
                os.killpg(state["pid"], signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError, PermissionError, TypeError):
                os.kill(state["runner_pid"], signal.SIGKILL)


def write_bytecode() -> None:
    """Compile skyhop's modules to bytecode once, so a timed command runs as an installed skyhop
    does (pip writes the bytecode at install): under ``PYTHONDONTWRITEBYTECODE`` (this machine
    sets it) every command would compile each module it imports again."""
    import compileall
    import re

    root = Path(__file__).resolve().parent.parent
    skipped = re.compile(r"/(\.[^/]*|build|tests|benchmarks|examples|node_modules)/")
    compileall.compile_dir(root, quiet=1, rx=skipped)


def embedded_env(home: Path) -> dict[str, str]:
    """Environment of a user with no Temporal configured: the CLI starts its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKYHOP_")}
    env.update(
        HOME=str(home),
        SKYHOP_HOME=str(home / ".skyhop"),
        SKYHOP_SERVER_PORT=str(free_port()),
        SKYHOP_UI_PORT=str(free_port()),
    )
    return env


def stop_embedded(env: dict[str, str]) -> None:
    """Tear down clusters, stop the embedded server, and kill by pid whatever is left."""
    state_file = Path(env["SKYHOP_HOME"]) / "server" / "server.json"
    if not state_file.exists():
        return
    state = json.loads(state_file.read_text())
    for command in (["down", "-a", "-y"], ["server", "stop"]):
        subprocess.run([SKYHOP_CLI, *command], env=env, capture_output=True, timeout=120)
    for pid in (state["worker_pid"], state["server_pid"]):
        if pid > 0:  # 0 is "none started" (e.g. only the server ran); kill(0) would hit our own group
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def embedded_skyhop(home: Path) -> Iterator[dict[str, str]]:
    """An embedded skyhop living in ``home``: its environment for the block, stopped after it."""
    env = embedded_env(home)
    try:
        yield env
    finally:
        stop_embedded(env)


@contextlib.contextmanager
def throwaway_skyhop() -> Iterator[tuple[Path, dict[str, str]]]:
    """An embedded skyhop in a new temporary home, for a benchmark: stopped after the block, and its
    home removed (its server's database is hundreds of MB after 10,000 jobs)."""
    home = Path(tempfile.mkdtemp(prefix="skyhop-bench-"))
    try:
        with embedded_skyhop(home) as env:
            yield home, env
    finally:
        shutil.rmtree(home, ignore_errors=True)


_FAKE_CONTAINER_RUNTIME = '''#!{python}
"""A podman stand-in: runs the job's script with bash on this machine, as a container would, and
records every call. Real podman cannot start containers in this sandbox (crun's setrlimit is denied)."""
import json, os, subprocess, sys
here = os.path.dirname(os.path.abspath(__file__))
args = sys.argv[1:]
with open(os.path.join(here, "calls.jsonl"), "a") as f:
    f.write(json.dumps(args) + "\\n")
images = os.path.join(here, "images")
if args[0] == "run":
    i, cwd, names = 1, None, []
    while args[i].startswith("-"):
        flag, value = args[i], args[i + 1]
        i += 2
        cwd = value if flag == "-w" else cwd
        names += [value] if flag == "-e" else []
    image, script = args[i], args[i + 2]
    env = {{n: os.environ[n] for n in names if n in os.environ}}
    env.update(PATH=os.environ["PATH"], CONTAINER_IMAGE=image)
    sys.exit(subprocess.run(["{bash}", "-c", script], cwd=cwd, env=env).returncode)
if args[0] == "commit":
    with open(images, "a") as f:
        f.write(args[2] + "\\n")
elif args[:2] == ["image", "inspect"]:
    known = open(images).read().split() if os.path.exists(images) else []
    sys.exit(0 if args[2] in known else 1)
'''


def fake_container_runtime(bin_dir: Path) -> Path:
    """Put a fake ``podman`` in ``bin_dir`` (a PATH holding nothing else); returns its call log.

    The fake runs a job's script on this machine with only the envs passed by name (``-e``), in the
    ``-w`` folder, and tells the image it ran in as ``$CONTAINER_IMAGE``.
    """
    import shutil

    bin_dir.mkdir(parents=True, exist_ok=True)
    fake = bin_dir / "podman"
    fake.write_text(_FAKE_CONTAINER_RUNTIME.format(python=sys.executable, bash=shutil.which("bash")))
    fake.chmod(0o755)
    return bin_dir / "calls.jsonl"
