"""``skyhop jobs queue`` and ``jobs cancel --all`` at scale: whole-command time with N managed jobs.

On an embedded skyhop (own HOME and ports: a Temporal dev server on SQLite and one worker), N
managed jobs are listed the way real ones are (ids from the allocator in one block, a workflow
with a managed job's id, search attributes and memo summary, and its row reported to the job
index), started on a task queue no worker polls, so nothing but the listing is measured. Then,
side by side, median of ``--runs``: all N read from visibility (pages of 1,000, rows from the memo:
how ``jobs queue`` listed before the index) and from the job index (every shard queried at once:
how it lists now), both in this process; ``jobs queue -a`` as a whole command; and ``jobs cancel
--all -y`` on the active ones among ``--cancel`` of them (the CLI's part: finding them and sending
every cancel; ending each is the workflow's, measured by ``managed_jobs_scale.py``).

Targets (issue 12): ``jobs queue`` under 1 s at N = 10,000; cancel of 2,000 in seconds.

    python benchmarks/jobs_queue.py [--jobs 10000] [--cancel 2000] [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

_STARTS_IN_FLIGHT = 20


async def _list_jobs(address: str, jobs: int, cancel: int) -> float:
    """Start ``jobs`` listed jobs (the first ``cancel`` of them for user ``bench-cancel``); seconds taken."""
    from temporalio.service import RPCError, RPCStatusCode

    from skyhop.cli.client import connect
    from skyhop.cli.config import TemporalConfig
    from skyhop.contract.job_index import ManagedJobStatus
    from tests.managed_jobs.fakes import allocated_ids, start_listed
    from tests.managed_jobs.support import attempt, job_state

    client = await connect(TemporalConfig(), address)
    gate = asyncio.Semaphore(_STARTS_IN_FLIGHT)
    statuses = list(ManagedJobStatus)
    started = time.monotonic()
    ids = await allocated_ids(client, jobs)

    async def one(job_id: int) -> None:
        state = job_state(job_id, [[attempt(1)]], statuses[job_id % len(statuses)])
        state = state.model_copy(
            update={
                "user": "bench-cancel" if job_id < ids[0] + cancel else "bench",
                "name": f"train-{job_id}",
            }
        )
        async with gate:
            while True:  # a start that timed out may have happened: sent again, it finds its workflow
                try:
                    await start_listed(client, state)
                    return
                except RPCError as exc:
                    if exc.status != RPCStatusCode.DEADLINE_EXCEEDED:
                        raise

    await asyncio.gather(*(one(job_id) for job_id in ids))
    while (await client.count_workflows("SkyhopKind = 'managed-job'")).count < jobs:
        await asyncio.sleep(0.5)
    return time.monotonic() - started


async def _side_by_side(address: str, runs: int) -> None:
    """Every job read from visibility (before the index) and from the index (now), in this process."""
    from skyhop.cli.client import connect
    from skyhop.cli.config import TemporalConfig
    from skyhop.cli.jobs_listing import indexed_jobs, listing_query, visible_jobs
    from skyhop.contract.job_index import JobRowsFilter

    client = await connect(TemporalConfig(), address)
    ways = {
        "visibility (before)": lambda: visible_jobs(client, listing_query(None)),
        "job index (now)": lambda: indexed_jobs(client, JobRowsFilter()),
    }
    listed = {}
    for way, listing in ways.items():
        times = []
        for _ in range(runs):
            started = time.monotonic()
            listed[way] = await listing()
            times.append(time.monotonic() - started)
        print(f"  {way:20} {len(listed[way]):6} rows   median {statistics.median(times):.2f} s "
              f"(min {min(times):.2f}, max {max(times):.2f})")  # fmt: skip
    same = [(s.job_id, status) for s, status, _ in listed["visibility (before)"]] == [
        (s.job_id, status) for s, status, _ in listed["job index (now)"]
    ]
    print(f"  the same jobs and statuses both ways: {same}")


def _timed(argv: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    from tests.helpers import SKYHOP_CLI

    started = time.monotonic()
    result = subprocess.run([SKYHOP_CLI, *argv], env=env, capture_output=True, text=True, check=True)
    return time.monotonic() - started, result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--cancel", type=int, default=2_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    from tests.helpers import SKYHOP_CLI, throwaway_skyhop, write_bytecode

    write_bytecode()

    with throwaway_skyhop() as (home, env):
        subprocess.run([SKYHOP_CLI, "server", "start"], env=env, check=True, capture_output=True)
        os.environ.update(env)  # the embedded skyhop's HOME: its payload key
        address = f"127.0.0.1:{env['SKYHOP_SERVER_PORT']}"
        took = asyncio.run(_list_jobs(address, args.jobs, args.cancel))
        print(
            f"{args.jobs} managed jobs in visibility and the index in {took:.1f} s "
            f"({args.jobs / took:.0f} starts/s)"
        )
        print(f"every job listed, in this process, median of {args.runs}:")
        asyncio.run(_side_by_side(address, args.runs))
        times = []
        for _ in range(args.runs):
            seconds, result = _timed(["jobs", "queue", "-a"], env)
            times.append(seconds)
        rows = len(result.stdout.splitlines()) - 1
        print(f"jobs queue -a: {rows} rows, median {statistics.median(times):.2f} s of {args.runs} "
              f"(min {min(times):.2f}, max {max(times):.2f})   (target < 1 s at 10,000)")  # fmt: skip
        json_s, _ = _timed(["jobs", "queue", "-a", "--json"], env)
        print(f"jobs queue -a --json: {json_s:.2f} s")
        help_s, _ = _timed(["jobs", "queue", "--help"], env)
        print(f"jobs queue --help (the CLI's own start-up): {help_s:.2f} s")
        cancel_s, result = _timed(["jobs", "cancel", "--all", "-y"], {**env, "LOGNAME": "bench-cancel"})
        print(
            f"jobs cancel --all -y, the active ones of {args.cancel} jobs: {cancel_s:.2f} s   "
            f"({result.stderr.strip()[:100]})"
        )


if __name__ == "__main__":
    main()
