"""The README's quick start on a base install (no cloud SDK, no OR-Tools), CLI and worker alike."""

from __future__ import annotations

import time
from pathlib import Path

from tests.conftest import skyhop
from tests.helpers import embedded_skyhop
from tests.sdk_blocker import blocked_env


def test_quick_start_runs_hints_down_and_a_cloud_without_its_sdk_fails_over_naming_the_extra(
    tmp_path: Path,
) -> None:
    with embedded_skyhop(tmp_path / "home") as embedded:
        env = blocked_env(tmp_path / "blocker", embedded)  # the worker it spawns inherits the blocker
        hello = skyhop("launch", "-y", "-c", "hi", "examples/hello.yaml", env=env, timeout=300)
        assert hello.returncode == 0, hello.stderr
        assert "hello from" in hello.stdout
        hint = "Cluster hi is UP; `skyhop down hi` when done (or `-i MIN` autostop)."
        assert hint in hello.stderr  # launch leaves what it created up, and says so
        again = skyhop("launch", "-y", "-c", "hi", "examples/hello.yaml", env=env, timeout=300)
        assert again.returncode == 0 and "skyhop down" not in again.stderr, again.stderr

        started = time.monotonic()
        cloud = skyhop("launch", "-y", "-c", "gpu", "--infra", "aws", "echo hi", env=env, timeout=300)
        output = cloud.stdout + cloud.stderr
        assert cloud.returncode == 1, output
        assert "aws needs boto3: pip install 'skyhop[aws]'" in output
        assert "Traceback" not in output
        assert time.monotonic() - started < 120  # fails over at once: nothing to clean up
