"""Session fixtures: a hermetic HOME, one Temporal dev server, one skyhop worker process.

Every process a test session starts is stopped by its pid at the end; nothing listens on a
fixed port and nothing reads the user's ``~/.skyhop``.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.helpers import SKYHOP_CLI, DevServer, WorkerProcess, kill_leftover_jobs

T = TypeVar("T")

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session", autouse=True)
def hermetic_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh HOME and SKYHOP_HOME for the whole session; no configured Temporal leaks in."""
    home = tmp_path_factory.mktemp("home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(home))
        mp.setenv("SKYHOP_HOME", str(home / ".skyhop"))
        # The SDK's default: the tests kill workers, and each kill would otherwise hold the dead
        # worker's workflows for a minute (``worker.STICKY_TIMEOUT``).
        mp.setenv("SKYHOP_WORKER_STICKY_TIMEOUT_S", "10")
        for name in list(os.environ):
            if name.startswith("SKYHOP_TEMPORAL_") or name in (
                "SKYHOP_SERVER_PORT",
                "SKYHOP_UI_PORT",
                "SKYHOP_KEY",
                "SKYHOP_KEY_FILE",
            ):
                mp.delenv(name)
        from skyhop.cli.config import TemporalConfig
        from skyhop.cli.payload_key import load_keyring
        from skyhop.providers.keys import use_payload_keyring

        # As the session worker does when it connects: providers called in this process seal and
        # open the deployment's node key with the session's payload key.
        use_payload_keyring(load_keyring(TemporalConfig()))
        yield home
        kill_leftover_jobs(home / ".skyhop")


@pytest.fixture(scope="session")
def temporal_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    """One real Temporal dev server for the session's integration tests."""
    server = DevServer(tmp_path_factory.mktemp("temporal"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def worker(temporal_server: DevServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    """One real skyhop worker process; durability tests kill and restart it."""
    process = WorkerProcess(temporal_server.address, tmp_path_factory.mktemp("worker"))
    process.start()
    yield process
    process.stop()


@pytest.fixture
def live_worker(worker: WorkerProcess) -> WorkerProcess:
    """The session worker, restarted if an earlier test killed it."""
    if worker.proc is None or worker.proc.poll() is not None:
        worker.start()
    return worker


@pytest.fixture
def cli_env(temporal_server: DevServer) -> dict[str, str]:
    """Environment for running the ``skyhop`` CLI against the session's server.

    It names the session's payload key explicitly, as a deployment would: a test that moves
    SKYHOP_HOME still signs with the key the session worker verifies.
    """
    return cli_environment(temporal_server.address)


def cli_environment(address: str) -> dict[str, str]:
    """``cli_env`` for a session fixture, or for another server."""
    from skyhop.cli.config import TemporalConfig
    from skyhop.cli.payload_key import default_key_file, load_payload_key

    load_payload_key(TemporalConfig())  # created on first use
    return {**os.environ, "SKYHOP_TEMPORAL_ADDRESS": address, "SKYHOP_KEY_FILE": str(default_key_file())}


def skyhop(
    *args: str, env: dict[str, str], timeout: float = 120, cwd: Path = REPO, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the ``skyhop`` CLI as a user would, in a subprocess."""
    return subprocess.run(
        [SKYHOP_CLI, *args],
        env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout, input=input,
    )  # fmt: skip


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine from a synchronous test."""
    return asyncio.run(coro)
