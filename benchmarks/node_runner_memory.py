"""Memory per running job on a node: the runner of a git revision (default: before the shell waiter)
next to this tree's, side by side in one run.

Each way starts ``--jobs`` jobs that ``sleep`` through the node runner's command line (as the
``local`` and ``ssh`` runtimes do), waits until all run, then reads, from ``/proc``, the resident
set (RSS) and the proportional set (PSS: shared pages divided among their sharers, from
``smaps_rollup``) of what waits for each job (its ``runner_pid``) and of the job itself (its
``pid``), and prints the per-job means. Every job is cancelled before the next way starts.

    python benchmarks/node_runner_memory.py [--jobs 200] [--before 44ce667]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
RUNNER = REPO / "providers" / "runtime" / "node_runner.py"


def _kib(pid: int, file: str, field: str) -> int:
    for line in Path(f"/proc/{pid}/{file}").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise LookupError(f"{field} not in /proc/{pid}/{file}")


def _states(root: Path, keys: list[str]) -> list[dict[str, Any]]:
    states = []
    for key in keys:
        try:
            states.append(json.loads((root / "jobs" / key / "state.json").read_text()))
        except (OSError, ValueError):
            states.append({})
    return states


def _measure(runner: Path, root: Path, jobs: int) -> dict[str, float]:
    keys = [f"job-{i}" for i in range(jobs)]
    spec = json.dumps({"script": "sleep 600", "cwd": str(root)})
    for key in keys:
        subprocess.run(
            [sys.executable, "-I", "-S", str(runner), "start", str(root), key],
            input=spec, capture_output=True, text=True, check=True,
        )  # fmt: skip
    deadline = time.monotonic() + 120
    states = _states(root, keys)
    while not all(s.get("status") == "RUNNING" for s in states):
        if time.monotonic() > deadline:
            raise TimeoutError("not every job is RUNNING after 120 s")
        time.sleep(0.2)
        states = _states(root, keys)
    try:
        figures = {
            "waiter RSS": statistics.mean(_kib(int(s["runner_pid"]), "status", "VmRSS") for s in states),
            "waiter PSS": statistics.mean(_kib(int(s["runner_pid"]), "smaps_rollup", "Pss") for s in states),
            "job PSS": statistics.mean(_kib(int(s["pid"]), "smaps_rollup", "Pss") for s in states),
        }
    finally:
        subprocess.run([sys.executable, "-I", "-S", str(runner), "cancel-all", str(root)], check=True)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--before", default="44ce667", help="git revision of the runner to compare with")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        before = Path(tmp) / "before" / "node_runner.py"
        before.parent.mkdir()
        source = subprocess.run(
            ["git", "-C", str(REPO), "show", f"{args.before}:providers/runtime/node_runner.py"],
            capture_output=True, check=True,
        ).stdout  # fmt: skip
        before.write_bytes(source)
        ways = {f"before ({args.before})": before, "after (this tree)": RUNNER}
        results = {
            name: _measure(runner, Path(tmp) / f"node-{i}", args.jobs)
            for i, (name, runner) in enumerate(ways.items())
        }
    print(f"{args.jobs} running `sleep` jobs each way; KiB per job (mean)")
    columns = list(next(iter(results.values())))
    print(f"{'':22}" + "".join(f"{c:>14}" for c in columns) + f"{'waiter+job PSS':>16}")
    for name, figures in results.items():
        total = figures["waiter PSS"] + figures["job PSS"]
        print(f"{name:22}" + "".join(f"{figures[c]:>14.0f}" for c in columns) + f"{total:>16.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
