"""Starting a job on a node in the worker's own process (``local``, ``sim``): the machine's CPU and
the wall time per start, the runner's command line next to the worker's own spawn, in one run.

- command line: ``python node_runner.py start`` (what the SSH runtime runs on a node, and what the
  local runtime ran before): a Python interpreter per start, besides the job's own ``run-job``;
- spawn: ``LocalNodeRuntime.start_job`` (the spec staged by the worker, the job claimed and its
  waiter started by a shell, ``node_runner._DETACH``).

Each way starts ``--jobs`` jobs that ``sleep``, ``--in-flight`` at a time, on one node folder;
a start returns once its job recorded itself. The CPU is the whole machine's (``/proc/stat``:
every process a start runs), so run it on a quiet machine; the ways alternate ``--rounds`` times
and each round cancels its jobs before the next.

    python benchmarks/job_start.py [--jobs 200] [--in-flight 20] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from skyhop.providers.base import LocalAccess, NodeHandle  # noqa: E402
from skyhop.providers.local.runtime import LocalNodeRuntime  # noqa: E402
from skyhop.providers.runtime import node_runner  # noqa: E402
from skyhop.providers.runtime.jobs import JobSpec  # noqa: E402


def _busy_seconds() -> float:
    """CPU seconds every core has been busy since boot (``/proc/stat``)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


async def _command_line(runtime: LocalNodeRuntime, spec: JobSpec) -> None:
    runner = str(runtime.root / "node_runner.py")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-I", "-S", runner, "start", str(runtime.root), spec.key,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    job = spec.model_copy(update={"env": {"HOME": str(runtime.root)}}).model_dump()
    out, err = await proc.communicate(json.dumps(job).encode())
    if out.strip() != b"started":
        raise RuntimeError(f"start {spec.key}: {err.decode().strip()}")


async def _spawn(runtime: LocalNodeRuntime, spec: JobSpec) -> None:
    await runtime.start_job(spec)


async def _round(
    way: Callable[[LocalNodeRuntime, JobSpec], Awaitable[None]], folder: Path, jobs: int, in_flight: int
) -> tuple[float, float]:
    """Seconds of the machine's CPU and of wall time per start."""
    node = NodeHandle(
        rank=0, instance_id="bench", ip="127.0.0.1", runtime_dir=str(folder), access=LocalAccess()
    )
    runtime = LocalNodeRuntime(node)
    await runtime.prepare()
    gate = asyncio.Semaphore(in_flight)

    async def one(i: int) -> None:
        async with gate:
            await way(runtime, JobSpec(key=f"job-{i}", script="exec sleep 3600"))

    busy, started = _busy_seconds(), time.monotonic()
    await asyncio.gather(*(one(i) for i in range(jobs)))
    cpu, wall = _busy_seconds() - busy, time.monotonic() - started
    states = [node_runner.read_state(str(folder), f"job-{i}") for i in range(jobs)]
    if any(state is None or state["status"] != node_runner.RUNNING for state in states):
        raise AssertionError("a started job is not RUNNING")
    node_runner.cancel_all(str(folder), grace_s=0.0)
    return cpu / jobs, wall / jobs


async def _main(args: argparse.Namespace) -> None:
    ways = {"command line": _command_line, "spawn": _spawn}
    figures: dict[str, list[tuple[float, float]]] = {way: [] for way in ways}
    with tempfile.TemporaryDirectory(prefix="skyhop-job-start-") as tmp:
        for r in range(args.rounds):
            for way, call in ways.items():
                folder = Path(tmp) / f"{r}-{way.replace(' ', '-')}"
                figures[way].append(await _round(call, folder, args.jobs, args.in_flight))
    print(f"{args.jobs} job starts per round, {args.in_flight} at a time, {args.rounds} rounds (median):")
    for way, rounds in figures.items():
        cpu = statistics.median(c for c, _ in rounds) * 1000
        wall = statistics.median(w for _, w in rounds) * 1000
        print(f"  {way:13} machine CPU {cpu:5.1f} ms per start, wall {wall:5.1f} ms per start")
    before, after = (statistics.median(c for c, _ in figures[w]) for w in ways)
    print(f"  CPU per start, command line / spawn: {before / after:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--in-flight", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    asyncio.run(_main(parser.parse_args()))


if __name__ == "__main__":
    main()
