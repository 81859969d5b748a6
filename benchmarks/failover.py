"""Failover overhead on the sim cloud: 20 cheapest zones out of capacity, the 21st comes up.

Each run is one ``LaunchWorkflow`` on a real Temporal dev server with a real worker (in this
process): 21 provision attempts, 20 re-optimizations, each failure recorded and blocked. The
provider's own time (every sim API call, its simulated latency included) is measured inside the
sim cloud and subtracted, so what remains per attempt is the control plane's: activity
scheduling, workflow tasks, history writes, optimizing, classification.

Target (issue 4): under 100 ms of control-plane overhead per attempt, median of 5 runs.

    python benchmarks/failover.py [--runs 5] [--latency 0.05]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # for tests.helpers

FAILING_ZONES = 20


def _zones() -> list[tuple[str, str]]:
    regions = ["us-east-1", "us-east-2", "us-west-1", "us-west-2", "eu-west-1", "eu-central-1", "ap-south-1"]
    return [(region, f"{region}{letter}") for region in regions for letter in "abcd"]


def _write_sim(home: Path, latency_s: float) -> None:
    """A catalog with 28 zones (each dearer than the one before) and a plan failing the first 20."""
    import yaml

    from skyhop.providers.base import CheckResult
    from skyhop.providers.catalog.skyhop_csv import COLUMNS
    from skyhop.providers.registry import write_checks

    sim = home / ".skyhop" / "sim"
    sim.mkdir(parents=True)
    zones = _zones()
    rows = [
        f"m6i.large,2,8,,,,{r},{z},{0.096 + i * 0.001:.3f},{0.03 + i * 0.001:.3f}"
        for i, (r, z) in enumerate(zones)
    ]
    (sim / "catalog.csv").write_text("\n".join([",".join(COLUMNS), *rows]) + "\n")
    faults = [{"zone": zone, "error": "capacity"} for _, zone in zones[:FAILING_ZONES]]
    plan = {"catalog": str(sim / "catalog.csv"), "latency_s": latency_s, "faults": faults}
    (sim / "plan.yaml").write_text(yaml.safe_dump(plan))
    write_checks({"sim": CheckResult(enabled=True, reason="benchmark")})


async def _launch(client: Any, infra: str) -> tuple[float, float, int]:
    """One launch: (wall seconds, provider seconds, attempts); the cluster is taken down after."""
    from skyhop.contract import (
        LAUNCH_WORKFLOW,
        WORKFLOW_QUEUE,
        ClusterUpdate,
        LaunchQuery,
        cluster_workflow_id,
    )
    from skyhop.contract.clusters import LaunchRequest, LaunchResult
    from skyhop.providers.sim import SimCloud
    from skyhop.spec import Resources, Task

    cloud = SimCloud()
    cluster = f"bench-{uuid.uuid4().hex[:6]}"
    before = await asyncio.to_thread(cloud.api_seconds)
    started = time.perf_counter()
    result = await client.execute_workflow(
        LAUNCH_WORKFLOW,
        LaunchRequest(cluster_name=cluster, task=Task(resources=Resources(infra=infra))),
        id=f"launch:{cluster}",
        task_queue=WORKFLOW_QUEUE,
        result_type=LaunchResult,
    )
    total = time.perf_counter() - started
    provider = await asyncio.to_thread(cloud.api_seconds) - before
    assert result.handle.offering.zone == _zones()[FAILING_ZONES][1], result.handle.offering
    progress = await client.get_workflow_handle(f"launch:{cluster}").query(LaunchQuery.PROGRESS)
    await client.get_workflow_handle(cluster_workflow_id(cluster)).execute_update(ClusterUpdate.DOWN)
    return total, provider, len(progress["attempts"]) + 1


async def _measure(
    address: str, runs: int
) -> list[tuple[tuple[float, float, int], tuple[float, float, int]]]:
    """Per run: a launch straight into the free zone (baseline), then one that fails over to it."""
    from skyhop.cli.client import connect
    from skyhop.cli.config import TemporalConfig
    from skyhop.worker import build_workers

    client = await connect(TemporalConfig(), address)
    workers = build_workers(client)
    for worker in workers:
        await worker.__aenter__()
    region, zone = _zones()[FAILING_ZONES]
    results = []
    try:
        for run in range(runs + 1):  # the first run warms up imports, catalogs and connections
            baseline = await _launch(client, f"sim/{region}/{zone}")
            failover = await _launch(client, "sim")
            if run:
                results.append((baseline, failover))
    finally:
        await asyncio.gather(*(w.shutdown() for w in workers))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--latency", type=float, default=0.05, help="simulated provider latency per API call (s)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="skyhop-failover-bench-") as tmp:
        home = Path(tmp)
        os.environ.update(HOME=str(home), SKYHOP_HOME=str(home / ".skyhop"))
        os.environ.pop("SKYHOP_TEMPORAL_ADDRESS", None)
        from tests.helpers import DevServer

        _write_sim(home, args.latency)
        server = DevServer(home)
        try:
            server.start()
            results = asyncio.run(_measure(server.address, args.runs))
        finally:
            server.stop()
    totals = [f[0] for _, f in results]
    baselines = [b[0] for b, _ in results]
    providers = [f[1] for _, f in results]
    # What each extra attempt costs the control plane: the failover launch minus the launch that
    # went straight to the free zone, provider time taken out of both, per failed attempt.
    overheads = [((f[0] - f[1]) - (b[0] - b[1])) / (f[2] - b[2]) for b, f in results]
    attempts = results[0][1][2]
    print(f"failover on sim: {FAILING_ZONES} zones out of capacity, attempt {attempts} comes up")
    print(f"  median of {args.runs} runs; provider latency {args.latency * 1000:.0f} ms per sim API call")
    spread = f"(min {min(totals):.2f}, max {max(totals):.2f})"
    print(f"  total launch time       {statistics.median(totals):.2f} s  {spread}")
    print(f"  straight to the zone    {statistics.median(baselines):.2f} s  (one attempt, no failover)")
    print(f"  provider time           {statistics.median(providers):.2f} s  (inside the sim cloud's API)")
    print(f"  overhead per attempt    {statistics.median(overheads) * 1000:.0f} ms  (target < 100 ms)")


if __name__ == "__main__":
    main()
