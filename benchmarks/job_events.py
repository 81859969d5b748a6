"""What running jobs cost while they run: worker slots, history events and heartbeats.

On an embedded skyhop (own HOME and ports: a Temporal dev server on SQLite and one worker), one
local cluster runs ``--jobs`` jobs that sleep; once all are RUNNING the script watches them idle
for ``--idle-s`` seconds, then cancels them and counts what their ends cost.

Measured (this design, ``workflows/job_watch.py``): activities held open on the long task queue
(each holds a worker slot), history events written while the jobs idle, events per job end.
Computed (the design before it, one ``wait_job`` per running job): its structure fixes the
figures, so they are derived rather than run: one activity and one long-queue slot per running
job, no history event while idle (heartbeats write none), three events per job end (the activity's
scheduled, started and completed). Heartbeats are server writes too: each open activity sends one
per 0.8 x its heartbeat timeout (the SDK's throttle).

Targets (issue 11): no slot per running job; at most 1 history event per idle running job per hour.

    python benchmarks/job_events.py [--jobs 20] [--idle-s 120]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


async def _bench(address: str, cluster: str, jobs: int, idle_s: float) -> dict[str, Any]:
    from skyhop.cli.client import connect
    from skyhop.cli.config import TemporalConfig
    from skyhop.cli.failures import asked_again
    from skyhop.contract import ClusterQuery, ClusterUpdate, JobStatus, cluster_workflow_id
    from skyhop.contract.clusters import CancelRequest, CancelResult, ClusterRecord, JobRecord, JobSubmission
    from skyhop.spec import Resources, Task

    client = await connect(TemporalConfig(), address)
    handle = client.get_workflow_handle(cluster_workflow_id(cluster))

    async def record() -> ClusterRecord:
        result: ClusterRecord = await asked_again(
            lambda: handle.query(ClusterQuery.STATUS, result_type=ClusterRecord)
        )
        return result

    async def events() -> int:
        return (await handle.describe()).raw_description.workflow_execution_info.history_length

    first = await record()
    assert first.handle is not None
    cpus = first.handle.offering.cpus / (jobs + 1)
    task = Task(run="sleep 3600", resources=Resources(cpus=f"{cpus:.3f}"))
    for i in range(jobs):
        submission = JobSubmission(request_id=f"bench-{i}", task=task, user="bench")
        await handle.execute_update(ClusterUpdate.SUBMIT_JOB, submission, result_type=JobRecord)
    while not all(job.status == JobStatus.RUNNING for job in (await record()).jobs):
        await asyncio.sleep(0.2)
    await asyncio.sleep(3)  # let the watcher re-arm after the last start
    pending = (await handle.describe()).raw_description.pending_activities
    names = sorted(activity.activity_type.name for activity in pending)
    before = await events()
    await asyncio.sleep(idle_s)
    idle_events = await events() - before
    before = await events()
    await handle.execute_update(ClusterUpdate.CANCEL, CancelRequest(all=True), result_type=CancelResult)
    while (await handle.describe()).raw_description.pending_activities:
        await asyncio.sleep(0.2)
    end_events = await events() - before
    return {"held": names, "idle_events": idle_events, "end_events": end_events}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--idle-s", type=float, default=120.0)
    args = parser.parse_args()
    from skyhop.workflows.options import HEARTBEAT
    from tests.helpers import SKYHOP_CLI, throwaway_skyhop

    with throwaway_skyhop() as (home, env):
        cluster_yaml = home / "cluster.yaml"
        cluster_yaml.write_text("resources:\n  infra: local\n")  # no run: just bring the cluster up
        subprocess.run([SKYHOP_CLI, "launch", "-y", "-c", "bench", str(cluster_yaml)], env=env, check=True)
        os.environ.update(env)  # the embedded skyhop's HOME: its payload key
        address = f"127.0.0.1:{env['SKYHOP_SERVER_PORT']}"
        started = time.monotonic()
        figures = asyncio.run(_bench(address, "bench", args.jobs, args.idle_s))
        took = time.monotonic() - started
    n = args.jobs
    held = len(figures["held"])
    per_hour = figures["idle_events"] / n * 3600 / args.idle_s
    beats = 3600 / (0.8 * HEARTBEAT.total_seconds())
    print(f"{n} jobs RUNNING on one local cluster, idle for {args.idle_s:.0f} s (run took {took:.0f} s)")
    print(f"{'':42} {'before (computed)':>18} {'after (measured)':>18}")
    print(f"{'activities held (long-queue slots)':42} {n:>18} {held:>18}   {figures['held']}")
    print(f"{'slots per running job':42} {1:>18.2f} {held / n:>18.2f}   (target: none per job)")
    print(f"{'history events while idle, all jobs':42} {0:>18} {figures['idle_events']:>18}")
    print(f"{'history events / idle running job / hour':42} {0:>18.2f} {per_hour:>18.2f}   (target <= 1)")
    print(f"{'heartbeats / hour, all jobs':42} {n * beats:>18.0f} {held * beats:>18.0f}")
    print(f"{'history events per job end (cancel all)':42} {'>= 3':>18} {figures['end_events'] / n:>18.2f}")


if __name__ == "__main__":
    main()
