"""How long a whole ``skyhop exec CLUSTER 'echo x'`` takes, next to the floor any Temporal CLI pays.

Measured side by side in one run, on an embedded skyhop with its own HOME and ports:
- exec: wall time of the ``skyhop exec`` process, from spawn to exit (job output included);
- floor: a bare ``python -c "import temporalio.client"`` process plus a no-op Temporal update
  round trip (a repeated ``submit_job`` update, which the cluster answers from its record);
- ``skyhop --help``.

Targets (issue 2): exec median under 1.0 s and under 2x the floor; --help under 250 ms.

    python benchmarks/exec_latency.py [--runs 20]
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


def _timed(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=env, check=True, capture_output=True)
    return time.perf_counter() - started


async def _update_round_trips(address: str, cluster: str, runs: int) -> list[float]:
    from skyhop.cli.client import connect
    from skyhop.cli.config import TemporalConfig
    from skyhop.contract import ClusterUpdate, cluster_workflow_id
    from skyhop.contract.clusters import JobRecord, JobSubmission
    from skyhop.spec import Task

    client = await connect(TemporalConfig(), address)
    handle = client.get_workflow_handle(cluster_workflow_id(cluster))
    submission = JobSubmission(request_id="bench-noop", task=Task(run="true"))
    await handle.execute_update(
        ClusterUpdate.SUBMIT_JOB, submission, id="bench-noop-0", result_type=JobRecord
    )
    times = []
    for i in range(runs):
        started = time.perf_counter()
        await handle.execute_update(
            ClusterUpdate.SUBMIT_JOB, submission, id=f"bench-noop-{i + 1}", result_type=JobRecord
        )
        times.append(time.perf_counter() - started)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    from tests.helpers import SKYHOP_CLI as skyhop
    from tests.helpers import throwaway_skyhop

    with throwaway_skyhop() as (_, env):
        subprocess.run(
            [skyhop, "launch", "-y", "-c", "bench", "echo ready"], env=env, check=True, capture_output=True
        )
        for _ in range(2):  # warm the page cache and the worker
            _timed([skyhop, "exec", "bench", "echo x"], env)
        exec_times, import_times, help_times = [], [], []
        for _ in range(args.runs):  # interleaved, so machine noise hits all three alike
            exec_times.append(_timed([skyhop, "exec", "bench", "echo x"], env))
            import_times.append(_timed([sys.executable, "-c", "import temporalio.client"], env))
            help_times.append(_timed([skyhop, "--help"], env))
        os.environ.update(env)
        address = f"127.0.0.1:{env['SKYHOP_SERVER_PORT']}"
        update_times = asyncio.run(_update_round_trips(address, "bench", args.runs))
    exec_median = statistics.median(exec_times)
    floor = statistics.median(import_times) + statistics.median(update_times)
    print(f"runs                            {args.runs}")
    p90 = _p90(exec_times) * 1000
    print(f"skyhop exec 'echo x'   median   {exec_median * 1000:7.0f} ms   (p90 {p90:.0f} ms)")
    print(f"import temporalio.client median {statistics.median(import_times) * 1000:7.0f} ms")
    print(f"no-op update round trip median  {statistics.median(update_times) * 1000:7.0f} ms")
    print(f"floor (import + update)         {floor * 1000:7.0f} ms")
    print(f"exec / floor                    {exec_median / floor:7.2f} x   (target < 2.0 x, exec < 1000 ms)")
    print(
        f"skyhop --help          median   {statistics.median(help_times) * 1000:7.0f} ms   (target < 250 ms)"
    )


def _p90(values: list[float]) -> float:
    return sorted(values)[int(0.9 * (len(values) - 1))]


if __name__ == "__main__":
    main()
