"""Workdir sync to an SSH host: skyhop's sync against a plain ``rsync -a`` of the same tree.

Starts one real sshd host (a network namespace where allowed, else loopback), registers it as
a pool with the embedded Temporal of a temporary SKYHOP_HOME (stopped at the end), provisions a
one-node cluster on it, and syncs a workdir of 2,000 small files plus one 200 MB file. Each
round copies the tree into a fresh folder twice, once with plain ``rsync -a -e ssh`` and once
with skyhop (order alternating between rounds), then re-syncs skyhop's copy unchanged. Prints
medians over the rounds, the ratio, and the targets (within 1.2x of plain rsync; no-change
re-sync under 1 s).

Run as root from the repository: ``python benchmarks/sync.py [--rounds 5] [--big-mb 200]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def make_tree(root: Path, small: int, big_mb: int) -> None:
    for i in range(small):
        folder = root / f"pkg{i % 50}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"mod{i}.py").write_text(f"# module {i}\nVALUE = {i}\n" * 8)
    with open(root / "weights.bin", "wb") as f:
        for _ in range(big_mb):
            f.write(os.urandom(1 << 20))


async def main(rounds: int, small: int, big_mb: int) -> None:
    work = Path(tempfile.mkdtemp(prefix="skyhop-bench-sync-"))
    os.environ["SKYHOP_HOME"] = str(work / "skyhop")
    from skyhop.cli.embedded import free_port
    from skyhop.cli.embedded import stop as stop_embedded

    os.environ["SKYHOP_SERVER_PORT"], os.environ["SKYHOP_UI_PORT"] = str(free_port()), str(free_port())
    from skyhop.providers.base import ProvisionRequest
    from skyhop.providers.ssh import SSHProvider
    from skyhop.providers.ssh.admin import register_pools
    from skyhop.providers.ssh.connection import close_connections, run
    from skyhop.providers.ssh.pools import HostSpec
    from skyhop.providers.ssh.transfer import ssh_shell
    from tests.ssh.hosts import SSHHosts

    (work / "hosts").mkdir()
    hosts = SSHHosts(work / "hosts", 1)
    hosts.start()
    host = hosts.hosts[0]
    provider = SSHProvider()
    try:
        spec = HostSpec(
            pool="bench", address=host.address, port=host.port, user="root", identity_file=str(hosts.key)
        )
        await register_pools({"bench": [spec]})
        await provider.load()
        handle = await provider.launch(
            ProvisionRequest(cluster_name="bench", offering=provider.offerings()[0], num_nodes=1)
        )
        runtime = provider.runtime(handle.nodes[0])
        endpoint = await runtime.login()
        tree = work / "tree"
        make_tree(tree, small, big_mb)
        remote_root = handle.nodes[0].runtime_dir
        shell = ssh_shell(endpoint)
        mode = "loopback sshd" if hosts.loopback else "sshd in a network namespace"
        print(f"tree: {small} small files + one {big_mb} MB file; host: {mode} at {host.address}:{host.port}")

        async def plain(dest: str) -> float:
            start = time.perf_counter()
            done = subprocess.run(
                ["rsync", "-a", "-e", shell, f"{tree}/", f"{host.address}:{dest}"], check=False
            )
            assert done.returncode == 0
            return time.perf_counter() - start

        async def skyhop(dest: str) -> float:
            start = time.perf_counter()
            await runtime.sync_dir(str(tree), dest)
            return time.perf_counter() - start

        plain_s, skyhop_s, resync_s = [], [], []
        for i in range(rounds):
            mine, theirs = f"{remote_root}/sky-{i}", f"{remote_root}/plain-{i}"
            if i % 2:
                skyhop_s.append(await skyhop(mine))
                plain_s.append(await plain(theirs))
            else:
                plain_s.append(await plain(theirs))
                skyhop_s.append(await skyhop(mine))
            resync_s.append(await skyhop(mine))
            await run(endpoint, f"rm -rf {shlex.quote(mine)} {shlex.quote(theirs)}", timeout=120)
            figures = f"plain {plain_s[-1]:.2f}s  skyhop {skyhop_s[-1]:.2f}s  no-change {resync_s[-1]:.3f}s"
            print(f"round {i + 1}: {figures}")
        ratio = statistics.median(skyhop_s) / statistics.median(plain_s)
        resync = statistics.median(resync_s)
        print(f"plain rsync -a, median of {rounds}:   {statistics.median(plain_s):.2f} s")
        print(f"skyhop sync, median of {rounds}:      {statistics.median(skyhop_s):.2f} s")
        verdict = "met" if ratio <= 1.2 else "MISSED"
        print(f"ratio skyhop / plain:        {ratio:.2f}x (target <= 1.2x: {verdict})")
        print(
            f"no-change re-sync, median:   {resync:.3f} s (target < 1 s: {'met' if resync < 1 else 'MISSED'})"
        )
        await provider.terminate(handle)
    finally:
        await close_connections()
        stop_embedded()
        hosts.stop()
        subprocess.run(["rm", "-rf", str(work)], check=False)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--small-files", type=int, default=2000)
    parser.add_argument("--big-mb", type=int, default=200)
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.small_files, args.big_mb))
