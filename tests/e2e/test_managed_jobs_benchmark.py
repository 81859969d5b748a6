"""``benchmarks/managed_jobs_scale.py`` at N = 3: every phase runs and every figure is printed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

_SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "managed_jobs_scale.py"


def test_the_managed_jobs_benchmark_runs_every_phase_at_small_n(tmp_path: Path) -> None:
    argv = [
        sys.executable,
        str(_SCRIPT),
        "--jobs",
        "3",
        "--idle-s",
        "3",
        "--preemptions",
        "2",
        "--cancel",
        "2",
    ]
    result = subprocess.run(
        argv, env={**os.environ, "TMPDIR": str(tmp_path)}, capture_output=True, text=True, timeout=280
    )
    assert result.returncode == 0, result.stderr[-3000:]
    for figure in (
        "launch throughput",
        "all RUNNING after",
        "worker peak RSS",
        "server peak RSS",
        "worker RSS per running job",
        "server RSS per running job",
        "machine memory per running job",
        "activities held open while idle",
        "history events / idle job / hour",
        "jobs queue -a",
        "preemption to relaunch decision (2)",
        "cancel until every cluster is gone",
        "collections that paused the worker",
        "relaunch decision p50 of the first 1 jobs preempted",
        "CPU per relaunch",
    ):
        assert figure in result.stdout, result.stdout
    # Where the machine's CPU went while idling, preempting and cancelling: skyhop's processes and the rest.
    shares = re.findall(
        r"cores of \d+ used (?:from|while)[^:]*: busy ([\d.]+): worker ([\d.]+), server ([\d.]+)"
        r".*, kernel threads ([\d.]+) \(.+ [\d.]+\), the rest",
        result.stdout,
    )
    assert len(shares) == 3, result.stdout
    for busy, worker, server, _kernel in shares:
        # The machine's busy time holds the worker's and the server's (each figure rounded).
        assert float(busy) + 0.02 >= float(worker) + float(server), result.stdout
