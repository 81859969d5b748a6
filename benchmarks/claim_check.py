"""Task files through the content store vs plain rsync, side by side in one run.

A 2,000-file workdir (plus one file of ``--big-mb``) is copied to a fresh node folder twice: once
with plain ``rsync -a`` (what a worker on the CLI's machine does), once through the claim check
(the CLI packs into the store, a worker fetches into its cache and rsyncs from there), on a
folder store and on an S3 store (moto's server on loopback). Then the unchanged tree is packed
again (the no-change re-upload a re-launch pays). Needs the test extra (moto):
``python benchmarks/claim_check.py [--files 2000] [--big-mb 20]``.

Log latency (a line written on a node until the CLI prints it) is ``benchmarks/log_latency.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def make_tree(root: Path, files: int, big_mb: int) -> None:
    for i in range(files):
        folder = root / f"pkg{i % 50}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"mod{i}.py").write_text(f"# module {i}\nVALUE = {i}\n" * 8)
    (root / "weights.bin").write_bytes(os.urandom(big_mb << 20))


def rsync(source: Path, dest: Path) -> float:
    from skyhop.providers.runtime.sync import rsync_command

    dest.mkdir(parents=True)
    command = rsync_command(str(source), str(dest))
    assert command is not None, "rsync is not installed"
    started = time.perf_counter()
    subprocess.run(command, check=True)
    return time.perf_counter() - started


async def through_store(store: object, tree: Path, cache: Path, node: Path) -> tuple[float, float, float]:
    """Pack (CLI), fetch (worker), rsync to the node: seconds of each."""
    from skyhop.storage.claim_check import fetch, pack
    from skyhop.storage.content import ContentStore, load_store_config

    assert isinstance(store, ContentStore)
    started = time.perf_counter()
    ref, _ = await pack(tree, store)
    packed = time.perf_counter()
    fetched = fetch(ref, cache, load_store_config())  # the worker's own endpoint and keys
    got = time.perf_counter()
    return packed - started, got - packed, rsync(fetched, node)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def main(files: int, big_mb: int) -> None:
    import logging

    import boto3
    from moto.server import ThreadedMotoServer

    from skyhop.storage.claim_check import pack
    from skyhop.storage.content import FolderContentStore, S3ContentStore

    work = Path(tempfile.mkdtemp(prefix="skyhop-bench-claim-"))
    tree = work / "workdir"
    make_tree(tree, files, big_mb)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's per-request lines
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    os.environ.update(
        AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1"
    )
    os.environ["SKYHOP_STORE_ENDPOINT_URL"] = endpoint
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket="bench")
    try:
        plain = rsync(tree, work / "node-plain")
        stores = {
            "folder store": FolderContentStore(work / "store"),
            "S3 store (moto)": S3ContentStore("bench", "skyhop", endpoint),
        }
        print(f"workdir: {files} files + {big_mb} MB, to a fresh node folder")
        print(f"  plain rsync -a                        {plain:7.2f} s")
        for name, store in stores.items():
            slug = name.split()[0].lower()
            up, down, sync = await through_store(store, tree, work / f"cache-{slug}", work / f"node-{slug}")
            total = up + down + sync
            print(
                f"  {name + ':':17} upload {up:5.2f} + fetch {down:5.2f} + rsync {sync:5.2f} = {total:6.2f} s"
                f" ({total / plain:.1f}x plain rsync)"
            )
            started = time.perf_counter()
            _, report = await pack(tree, store)
            assert report.uploaded == 0
            print(
                f"  {name + ':':17} no-change re-upload {time.perf_counter() - started:5.2f} s (0 blobs sent)"
            )
        print("log latency: not measured (logs still stream from the nodes)")
    finally:
        server.stop()
        subprocess.run(["rm", "-rf", str(work)], check=False)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--big-mb", type=int, default=20)
    args = parser.parse_args()
    asyncio.run(main(args.files, args.big_mb))
