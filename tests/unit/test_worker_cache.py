"""The worker's sticky cache size and timeout are an operator's settings
(``SKYHOP_WORKER_CACHED_WORKFLOWS``, ``SKYHOP_WORKER_STICKY_TIMEOUT_S``)."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta

import pytest

from skyhop import worker
from skyhop.cli.config import ConfigError
from skyhop.cli.worker_process import cached_workflows, sticky_timeout


def test_the_cache_size_defaults_and_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SKYHOP_WORKER_CACHED_WORKFLOWS", raising=False)
    assert cached_workflows() == worker.CACHED_WORKFLOWS
    monkeypatch.setenv("SKYHOP_WORKER_CACHED_WORKFLOWS", "250")
    assert cached_workflows() == 250


@pytest.mark.parametrize("raw", ["lots", "-5", str(worker.WORKFLOW_TASK_SLOTS - 1)])
def test_a_bad_cache_size_is_refused(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv("SKYHOP_WORKER_CACHED_WORKFLOWS", raw)
    with pytest.raises(ConfigError, match="SKYHOP_WORKER_CACHED_WORKFLOWS"):
        cached_workflows()


def test_the_sticky_timeout_defaults_and_is_read_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SKYHOP_WORKER_STICKY_TIMEOUT_S", raising=False)
    assert sticky_timeout() == worker.STICKY_TIMEOUT
    monkeypatch.setenv("SKYHOP_WORKER_STICKY_TIMEOUT_S", "15")
    assert sticky_timeout() == timedelta(seconds=15)


@pytest.mark.parametrize("raw", ["soon", "0", "2.5"])
def test_a_bad_sticky_timeout_is_refused(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv("SKYHOP_WORKER_STICKY_TIMEOUT_S", raw)
    with pytest.raises(ConfigError, match=r"SKYHOP_WORKER_STICKY_TIMEOUT_S=.*at least 1 \(seconds\)"):
        sticky_timeout()


def test_the_worker_process_refuses_it_in_one_line_with_exit_2() -> None:
    """Before it connects anywhere: nothing is started."""
    result = subprocess.run(
        [sys.executable, "-m", "skyhop.cli.worker_process", "--address", "127.0.0.1:1"],
        env={**os.environ, "SKYHOP_WORKER_CACHED_WORKFLOWS": "lots"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"Error: SKYHOP_WORKER_CACHED_WORKFLOWS='lots': must be a whole number of at least "
        f"{worker.WORKFLOW_TASK_SLOTS} (the workflow tasks a worker runs at once)"
    ]
