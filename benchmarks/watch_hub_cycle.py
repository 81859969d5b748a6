"""What one watch hub cycle costs (``activities.watch_hub.poll_followed``) at N followed runs.

Each run is a one-node ``local`` cluster of its own (as a managed job's is) whose job is RUNNING
with some output, the way ``node_runner`` leaves it: a cycle asks each node once (file reads, in
process) and ships the run's new output to the log store. Runs are spread over
``WATCH_HUB_SHARDS`` hubs, so one hub's cycle at N = 10,000 is about the N / 32 line; the
relaunch decision needs a cycle well under ``CYCLE_S``. Prints the mean cycle per 1,000 runs after
the first (which lists the store): runs that stay quiet, as most long jobs do, have their logs read
every ``_QUIET_SHIP_EVERY`` cycles, so the mean over many cycles is what a hub costs.

Two lines per N: runs whose runners the hub holds (``activities.runner_exits``: their nodes are
asked only when a runner exits, and every ``_ASK_HELD_EVERY`` cycles), and runs asked every cycle
(the open-file budget spent, or nodes that are not in process).

    python benchmarks/watch_hub_cycle.py [--runs 1000 10000] [--cycles 13]
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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _followed(root: Path, n: int) -> list[object]:
    from skyhop.activities.models import AttemptLog, FollowedRun, WatchedJob
    from skyhop.activities.watch_hub import Followed
    from skyhop.contract import JOB_KEY_PREFIX
    from skyhop.providers.base import ClusterHandle, NodeHandle, Offering

    offering = Offering(provider="local", instance_type="local", cpus=1, memory_gib=1, price=0)
    runs = []
    for index in range(n):
        runtime_dir = root / f"node-{index}"
        job = runtime_dir / "jobs" / f"{JOB_KEY_PREFIX}1"
        job.mkdir(parents=True)
        state = {
            "status": "RUNNING",
            "pid": os.getpid(),
            "runner_pid": os.getpid(),
            "started_at": time.time(),
        }
        (job / "state.json").write_text(json.dumps(state))
        (job / "run.log").write_text("step 1\n")
        node = NodeHandle(rank=0, instance_id=f"i-{index}", ip="127.0.0.1", runtime_dir=str(runtime_dir))
        handle = ClusterHandle(cluster_name=f"job-{index}", offering=offering, nodes=[node])
        runs.append(
            Followed(
                FollowedRun(
                    key=f"managed-job:{index}/task-0/attempt-1",
                    owner=f"managed-job:{index}",
                    handle=handle,
                    job=WatchedJob(job_id=1, nodes=[0], running=True),
                    log=AttemptLog(job_id=index, task_index=0, attempt=1),
                )
            )
        )
    return runs


async def _cycles(followed: list[object], cycles: int, hold: bool) -> list[float]:
    from temporalio.testing import ActivityEnvironment

    from skyhop.activities import runner_exits
    from skyhop.activities.watch_hub import poll_followed

    runner_exits._BUDGET_SHARE = 0.5 if hold else 0.0  # no pidfd fits a budget of none
    env = ActivityEnvironment()
    exits = runner_exits.RunnerExits()
    times = []
    try:
        for _ in range(cycles):
            started = time.perf_counter()
            ended = await env.run(poll_followed, followed, exits)
            times.append(time.perf_counter() - started)
            assert not ended, f"{len(ended)} runs ended"
    finally:
        exits.close()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, nargs="+", default=[1_000, 10_000])
    parser.add_argument("--cycles", type=int, default=13, help="cycles after the first")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="skyhop-hub-bench-") as folder:
        os.environ["SKYHOP_HOME"] = str(Path(folder) / "home")  # the log store goes there
        from skyhop.contract.watch_hub import WATCH_HUB_SHARDS

        print(
            f"one watch hub cycle, local nodes (hubs: {WATCH_HUB_SHARDS}); "
            f"mean of {args.cycles} cycles after the first"
        )
        for n in args.runs:
            for hold, how in ((True, "runners held"), (False, "asked each cycle")):
                followed = _followed(Path(folder) / f"n{n}-{how.split()[0]}", n)
                times = asyncio.run(_cycles(followed, args.cycles + 1, hold))
                cycle = statistics.mean(times[1:] or times)
                print(
                    f"{n:>7} runs, {how:<16}: cycle {cycle * 1e3:8.1f} ms, "
                    f"{cycle * 1e3 / n * 1000:6.1f} ms per 1,000 runs; "
                    f"one of {WATCH_HUB_SHARDS} hubs at N = {n}: {cycle / WATCH_HUB_SHARDS * 1e3:.1f} ms"
                )


if __name__ == "__main__":
    main()
