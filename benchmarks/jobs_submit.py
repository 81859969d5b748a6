"""Managed-job submit throughput: an id per job (``submit_job``, as ``jobs launch`` does) against
one block of ids for all (``submit_jobs``, for programs), side by side on one embedded skyhop.

``submit_job`` takes each id from the allocator with its own update, and Temporal allows at most
10 updates in flight on one workflow, so at most 10 submits run at once; ``submit_jobs`` asks once
and then only starts workflows (20 at once). Each job asks for what no offering has, so it ends
FAILED_PRECHECKS at once, holding no cluster: the submit path is what is measured.

    python benchmarks/jobs_submit.py [--jobs 500]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

_ALLOCATOR_UPDATES_IN_FLIGHT = 10
"""Temporal's default limit of updates in flight on one workflow (the allocator)."""


async def _bench(address: str, n: int) -> None:
    from skyhop.cli.client import connect
    from skyhop.cli.config import TemporalConfig
    from skyhop.cli.jobs_submit import STARTS_IN_FLIGHT, submit_job, submit_jobs
    from skyhop.contract.managed_jobs import ManagedJobRequest
    from skyhop.spec import Resources, Task

    client = await connect(TemporalConfig(), address)
    task = Task(run="true", resources=Resources(infra="sim", accelerators="H100:64"))
    request = ManagedJobRequest(job_id=1, name="bench", tasks=[task], user="bench")
    gate = asyncio.Semaphore(_ALLOCATOR_UPDATES_IN_FLIGHT)

    async def one() -> int:
        async with gate:
            return await submit_job(client, request)

    started = time.monotonic()
    await asyncio.gather(*(one() for _ in range(n)))
    each = time.monotonic() - started
    print(
        f"submit_job x {n}, {_ALLOCATOR_UPDATES_IN_FLIGHT} at once (an id each): "
        f"{each:6.1f} s  {n / each:5.0f} jobs/s"
    )
    started = time.monotonic()
    await submit_jobs(client, [request] * n)
    block = time.monotonic() - started
    print(
        f"submit_jobs of {n}, {STARTS_IN_FLIGHT} starts at once (one block): "
        f"{block:6.1f} s  {n / block:5.0f} jobs/s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=500)
    args = parser.parse_args()
    from tests.helpers import SKYHOP_CLI, throwaway_skyhop

    with throwaway_skyhop() as (home, env):
        for command in (["check"], ["server", "start"]):
            subprocess.run([SKYHOP_CLI, *command], env=env, check=True, capture_output=True)
        os.environ.update(env)  # the embedded skyhop's HOME: its payload key
        asyncio.run(_bench(f"127.0.0.1:{env['SKYHOP_SERVER_PORT']}", args.jobs))


if __name__ == "__main__":
    main()
