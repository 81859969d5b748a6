"""A cluster's job queue under load: 1,000 short jobs on one local cluster with 4 CPU slots.

On an embedded skyhop (own HOME and ports: a Temporal dev server on SQLite and one worker):
- submission throughput: 1,000 ``submit_job`` updates (``skyhop exec -d`` without the process
  start), 8 in flight at a time;
- ``skyhop queue`` latency while the cluster holds about 1,000 jobs: the whole CLI process, and
  the ``status`` query alone;
- drain: how long the 1,000 jobs take to run, 4 at a time;
- submit to RUNNING when a slot is free: jobs submitted one by one on the idle cluster, from the
  workflow's own timestamps (the update that queued the job, the task that saw it start);
- peak RSS (VmHWM) of the worker and of the Temporal server, and how many runs the cluster's
  history was split into by continue-as-new.

Targets (issue 6): at least 50 submissions/s; queue listing under 500 ms.

    python benchmarks/job_queue.py [--jobs 1000] [--latency-samples 50] [--in-flight 8]
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
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SLOTS = 4
IN_FLIGHT = 8
"""Concurrent submissions. On the SQLite dev server, more than about 8 updates in flight on one
workflow start to collide (speculative workflow tasks are lost and their updates retried), and
throughput drops: ``--in-flight 16`` shows it."""
_TRANSIENT = {"UNAVAILABLE", "RESOURCE_EXHAUSTED", "ABORTED", "INTERNAL"}


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def _bench(
    address: str, cluster: str, jobs: int, samples: int, in_flight: int, env: dict[str, str]
) -> dict[str, Any]:
    from temporalio.service import RPCError

    from skyhop.cli.client import connect
    from skyhop.cli.config import TemporalConfig
    from skyhop.contract import ClusterQuery, ClusterUpdate, cluster_workflow_id
    from skyhop.contract.clusters import ClusterRecord, JobRecord, JobSubmission
    from skyhop.spec import Resources, Task
    from tests.helpers import SKYHOP_CLI

    client = await connect(TemporalConfig(), address)
    handle = client.get_workflow_handle(cluster_workflow_id(cluster))
    record = await handle.query(ClusterQuery.STATUS, result_type=ClusterRecord)
    assert record.handle is not None
    slot = Resources(cpus=f"{record.handle.offering.cpus / SLOTS:g}")
    task = Task(run="true", resources=slot)

    retries = 0

    async def submit(request_id: str) -> JobRecord:
        """One ``submit_job``; a transient refusal is retried with the same ids (it cannot double)."""
        nonlocal retries
        submission = JobSubmission(request_id=request_id, task=task, user="bench")
        while True:
            try:
                job: JobRecord = await handle.execute_update(
                    ClusterUpdate.SUBMIT_JOB, submission, id=request_id, result_type=JobRecord
                )
                return job
            except RPCError as exc:
                if exc.status.name not in _TRANSIENT:
                    raise
                retries += 1
                await asyncio.sleep(0.2)

    async def status() -> ClusterRecord:
        result: ClusterRecord = await handle.query(ClusterQuery.STATUS, result_type=ClusterRecord)
        return result

    # 1. Submission throughput.
    gate = asyncio.Semaphore(in_flight)

    async def bounded(i: int) -> JobRecord:
        async with gate:
            return await submit(f"bulk-{i}")

    started = time.perf_counter()
    submitted = await asyncio.gather(*(bounded(i) for i in range(jobs)))
    submit_s = time.perf_counter() - started
    assert len({job.job_id for job in submitted}) == jobs

    # 2. Queue listing with the backlog in place.
    held = len((await status()).jobs)
    query_times, cli_times, floor_times = [], [], []
    for _ in range(5):
        t0 = time.perf_counter()
        await status()
        query_times.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        subprocess.run([SKYHOP_CLI, "queue", cluster, "-a"], env=env, check=True, capture_output=True)
        cli_times.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import temporalio.client"], check=True)
        floor_times.append(time.perf_counter() - t0)

    # 3. Drain.
    last = submitted[-1].job_id
    while True:
        record = await status()
        done = [job for job in record.jobs if job.job_id <= last and job.status.done]
        if not record.active_jobs:
            break
        await asyncio.sleep(0.5)
    drain_s = time.perf_counter() - started
    failed = [job for job in record.jobs if job.job_id <= last and job.status.value != "SUCCEEDED"]

    # 4. Submit -> RUNNING with a free slot.
    waits = []
    for i in range(samples):
        job = await submit(f"latency-{i}")
        while True:
            record = await status()
            mine = next(j for j in record.jobs if j.job_id == job.job_id)
            if mine.status.done:
                break
            await asyncio.sleep(0.02)
        assert mine.started_at is not None
        waits.append(mine.started_at - mine.submitted_at)

    runs = len([wf async for wf in client.list_workflows(f"WorkflowId = '{cluster_workflow_id(cluster)}'")])
    payload = len(ClusterRecord.model_validate(record).model_dump_json())
    return {
        "submit_s": submit_s,
        "held": held,
        "query_ms": statistics.median(query_times) * 1000,
        "cli_ms": statistics.median(cli_times) * 1000,
        "floor_ms": statistics.median(floor_times) * 1000,
        "drain_s": drain_s,
        "done": len(done),
        "failed": len(failed),
        "waits": waits,
        "runs": runs,
        "payload_kb": payload / 1024,
        "retries": retries,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--latency-samples", type=int, default=50)
    parser.add_argument("--in-flight", type=int, default=IN_FLIGHT)
    args = parser.parse_args()
    from tests.helpers import SKYHOP_CLI, throwaway_skyhop

    with throwaway_skyhop() as (home, env):
        cluster_yaml = home / "cluster.yaml"
        cluster_yaml.write_text("resources:\n  infra: local\n")  # no run: just bring the cluster up
        subprocess.run([SKYHOP_CLI, "launch", "-y", "-c", "bench", str(cluster_yaml)], env=env, check=True)
        os.environ.update(env)
        from skyhop.cli.embedded import read_state

        state = read_state()
        assert state is not None
        address = f"127.0.0.1:{env['SKYHOP_SERVER_PORT']}"
        figures = asyncio.run(_bench(address, "bench", args.jobs, args.latency_samples, args.in_flight, env))
        worker_mb, server_mb = _peak_rss_mb(state.worker_pid), _peak_rss_mb(state.server_pid)
    waits = figures["waits"]
    rate = args.jobs / figures["submit_s"]
    print(f"jobs submitted                    {args.jobs} ({args.in_flight} in flight), {SLOTS} CPU slots")
    print(f"submission throughput             {rate:7.1f} jobs/s   (target >= 50)")
    print(f"submissions retried (server busy) {figures['retries']:7d}")
    print(
        f"skyhop queue, {figures['held']:4d} jobs held   {figures['cli_ms']:7.0f} ms     (whole CLI process)"
    )
    print(
        f"  of which import temporalio.client {figures['floor_ms']:5.0f} ms     (any Python client pays it)"
    )
    print(
        f"status query, {figures['held']:4d} jobs held   {figures['query_ms']:7.0f} ms     (target < 500 ms)"
    )
    drain_s = figures["drain_s"]
    print(f"drain (submit to last job done)   {drain_s:7.1f} s      ({args.jobs / drain_s:.1f} jobs/s)")
    print(f"jobs not SUCCEEDED                {figures['failed']:7d}")
    print(
        f"submit -> RUNNING, slot free      median {statistics.median(waits) * 1000:.0f} ms, "
        f"p99 {_percentile(waits, 0.99) * 1000:.0f} ms ({len(waits)} samples)"
    )
    print(f"peak RSS worker / server          {worker_mb:7.0f} MB / {server_mb:.0f} MB")
    print(f"cluster workflow runs (CAN)       {figures['runs']:7d}")
    print(f"cluster record payload at the end {figures['payload_kb']:7.0f} KB")


if __name__ == "__main__":
    main()
