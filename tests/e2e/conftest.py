"""An embedded skyhop (its own HOME, server ports, dev server and worker) driven by the real CLI."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import skyhop
from tests.helpers import free_port


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
    skyhop("down", "-a", "-y", env=env)
    skyhop("server", "stop", env=env)
    for pid in (state["worker_pid"], state["server_pid"]):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def user_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """One embedded skyhop shared by a module's tests."""
    env = embedded_env(tmp_path_factory.mktemp("user"))
    yield env
    stop_embedded(env)


@pytest.fixture
def fresh_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A user who has never run skyhop."""
    env = embedded_env(tmp_path)
    yield env
    stop_embedded(env)
