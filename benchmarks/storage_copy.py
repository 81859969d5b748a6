"""COPY from S3 to a node, parallel against one stream; MOUNT's close-to-visible latency.

Starts moto's S3 server on loopback (the tests' ``moto_server``), fills a bucket with one large file
and many medium ones, and copies each set to a fresh folder twice per round: once with the exact
script a node runs for ``mode: COPY`` (``storage.node_commands.attach_script``: 8 transfers,
8 streams per large file), once with the same script limited to one transfer and one stream
(order alternating between rounds). Then mounts a bucket as ``mode: MOUNT`` does, writes files
into the mount one at a time, and times each from its ``close()`` until ``HeadObject`` finds it.
Prints MB/s side by side with the ratio, and the latency's p50 and p99.

Run from the repository (needs rclone and fuse3): ``python benchmarks/storage_copy.py
[--rounds 3] [--big-mb 256] [--files 64] [--file-mb 4] [--mount-files 50]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from skyhop.spec.storage import BucketRef, StorageMode, StoreKind  # noqa: E402
from skyhop.storage.node_commands import _COPY_FLAGS, attach_script, detach_script, rclone_env  # noqa: E402
from skyhop.storage.plan import MountPlan  # noqa: E402

_ONE_STREAM = "--transfers 1 --checkers 1 --multi-thread-streams 0"


def _copy(node: Path, bucket: str, env: dict[str, str], one_stream: bool) -> float:
    plan = MountPlan(
        target="~/data", mode=StorageMode.COPY, bucket=BucketRef(store=StoreKind.S3, bucket=bucket)
    )
    script = attach_script([plan])
    if one_stream:
        script = script.replace(_COPY_FLAGS, _ONE_STREAM)
    subprocess.run(["rm", "-rf", str(node)], check=True)
    node.mkdir(parents=True)
    start = time.perf_counter()
    subprocess.run(["bash", "-c", script], env={**env, "HOME": str(node)}, check=True, capture_output=True)
    return time.perf_counter() - start


def _mount_latency(work: Path, store: object, bucket: str, env: dict[str, str], files: int) -> list[float]:
    node = work / "mount-node"
    node.mkdir()
    plan = MountPlan(
        target="~/m", mode=StorageMode.MOUNT, bucket=BucketRef(store=StoreKind.S3, bucket=bucket)
    )
    node_env = {**env, "HOME": str(node)}
    subprocess.run(["bash", "-c", attach_script([plan])], env=node_env, check=True, capture_output=True)
    client = store._client  # type: ignore[attr-defined]
    latencies = []
    try:
        for i in range(files):
            payload = os.urandom(256 << 10)
            with open(node / "m" / f"f{i}.bin", "wb") as f:
                f.write(payload)
            closed = time.perf_counter()
            while True:
                try:
                    client.head_object(Bucket=bucket, Key=f"f{i}.bin")
                    break
                except client.exceptions.ClientError:
                    time.sleep(0.002)
            latencies.append(time.perf_counter() - closed)
    finally:
        subprocess.run(["bash", "-c", detach_script()], env=node_env, check=False, capture_output=True)
    return latencies


def main(rounds: int, big_mb: int, files: int, file_mb: int, mount_files: int) -> None:
    import logging

    logging.disable(logging.WARNING)
    work = Path(tempfile.mkdtemp(prefix="skyhop-bench-storage-"))
    os.environ["HOME"] = str(work)
    from skyhop.storage.s3 import S3Store
    from tests.providers.aws_support import moto_server

    with moto_server(work) as _:
        logging.getLogger("werkzeug").disabled = True
        store = S3Store()
        sets = {
            f"one {big_mb} MB file": ("bench-big", [big_mb]),
            f"{files} x {file_mb} MB": ("bench-many", [file_mb] * files),
        }
        for bucket, sizes in sets.values():
            store.create(bucket, None, {})
            src = work / bucket
            src.mkdir()
            for i, size in enumerate(sizes):
                with open(src / f"part{i}.bin", "wb") as f:
                    for _ in range(size):
                        f.write(os.urandom(1 << 20))
            store.upload(src, bucket, "")
        env = {**os.environ, **rclone_env(StoreKind.S3, store.rclone_config())}
        print(f"COPY from moto's S3 on loopback, median of {rounds} rounds (MB/s):")
        print(f"  {'data':<22} {'one stream':>11} {'parallel':>10} {'ratio':>7}")
        for label, (bucket, sizes) in sets.items():
            timings: dict[bool, list[float]] = {True: [], False: []}
            for r in range(rounds):
                for one_stream in (r % 2 == 0, r % 2 != 0):
                    timings[one_stream].append(_copy(work / "node", bucket, env, one_stream))
            total = sum(sizes)
            one, par = (total / statistics.median(timings[flag]) for flag in (True, False))
            print(f"  {label:<22} {one:>11.1f} {par:>10.1f} {par / one:>6.2f}x")
        store.create("bench-mount", None, {})
        latencies = sorted(_mount_latency(work, store, "bench-mount", env, mount_files))
        p50 = statistics.median(latencies)
        p99 = latencies[min(len(latencies) - 1, round(0.99 * (len(latencies) - 1)))]
        print(
            f"MOUNT, 256 KB files: close() -> object visible: "
            f"p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms"
        )
    subprocess.run(["rm", "-rf", str(work)], check=False)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--big-mb", type=int, default=256)
    parser.add_argument("--files", type=int, default=64)
    parser.add_argument("--file-mb", type=int, default=4)
    parser.add_argument("--mount-files", type=int, default=50)
    args = parser.parse_args()
    main(args.rounds, args.big_mb, args.files, args.file_mb, args.mount_files)
