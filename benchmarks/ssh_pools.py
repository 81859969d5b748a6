"""What keeping SSH pools in Temporal costs a provision: ``SSHPoolsWorkflow`` round trips.

Starts a dev server and one worker of its own (own SKYHOP_HOME, free ports; both stopped at the
end), registers one pool of N fabricated hosts (no probe: only the workflow is measured), then:
- allocate + release, one cluster at a time: the two updates every provision and terminate send;
- the ``inventory`` query a node runtime asks on first use;
- a burst: B clusters allocate at once (racing provisions): wall time until all are answered,
  and that each got a different host.

    python benchmarks/ssh_pools.py [--rounds 50] [--hosts 200] [--burst 50]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _ms(values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[int(len(ordered) * 0.95) - 1]
    return f"p50 {statistics.median(ordered) * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms"


async def measure(rounds: int, hosts: int, burst: int) -> None:
    from skyhop.contract.ssh_pools import (
        AllocatedHosts,
        AllocateHosts,
        RegisterPools,
        ReleaseHosts,
        SSHPoolsUpdate,
    )
    from skyhop.providers.ssh.deployment import fetch_inventory, update_pools
    from skyhop.providers.ssh.inventory import Host, HostFacts, Inventory
    from skyhop.providers.ssh.pools import HostSpec

    facts = HostFacts(hostname="h", home="/root", cpus=8, memory_gib=32, rsync=True)
    pool = [
        Host(spec=HostSpec(pool="bench", address=f"10.1.{n // 250}.{n % 250 + 1}", user="root"), facts=facts)
        for n in range(hosts)
    ]
    await update_pools(SSHPoolsUpdate.REGISTER, RegisterPools(pools={"bench": pool}), Inventory)

    def allocation(cluster: str) -> AllocateHosts:
        return AllocateHosts(cluster=cluster, pool="bench", instance_type=facts.shape, num_nodes=1)

    allocate, release, query = [], [], []
    for i in range(rounds):
        started = time.perf_counter()
        await update_pools(SSHPoolsUpdate.ALLOCATE, allocation(f"c{i}"), AllocatedHosts)
        allocate.append(time.perf_counter() - started)
        started = time.perf_counter()
        await fetch_inventory()
        query.append(time.perf_counter() - started)
        started = time.perf_counter()
        await update_pools(SSHPoolsUpdate.RELEASE, ReleaseHosts(cluster=f"c{i}"), type(None))
        release.append(time.perf_counter() - started)
    started = time.perf_counter()
    answers = await asyncio.gather(
        *(update_pools(SSHPoolsUpdate.ALLOCATE, allocation(f"b{i}"), AllocatedHosts) for i in range(burst))
    )
    burst_s = time.perf_counter() - started
    distinct = len({a.hosts[0].spec.host_id for a in answers})
    print(f"pool of {hosts} hosts, {rounds} rounds (dev server on SQLite, one worker)")
    print(f"allocate update:  {_ms(allocate)}")
    print(f"release update:   {_ms(release)}")
    print(f"inventory query:  {_ms(query)}")
    print(f"{burst} allocations at once: {burst_s:.2f} s to answer all; {distinct} distinct hosts")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--hosts", type=int, default=200)
    parser.add_argument("--burst", type=int, default=50)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="skyhop-bench-pools-"))
    os.environ["SKYHOP_HOME"] = str(work / "skyhop")
    from skyhop.cli.output import exit_now
    from tests.helpers import DevServer, WorkerProcess

    (work / "server").mkdir()
    server = DevServer(work / "server")
    worker = WorkerProcess(server.address, work)
    try:
        server.start()
        os.environ["SKYHOP_TEMPORAL_ADDRESS"] = server.address
        worker.start()
        asyncio.run(measure(args.rounds, args.hosts, args.burst))
    finally:
        worker.stop()
        server.stop()
    exit_now(0)  # the Temporal client's threads must not abort the exit


if __name__ == "__main__":
    main()
