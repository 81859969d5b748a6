"""COPY from S3 to a node, parallel against one stream, on two S3 servers; MOUNT's close-to-visible latency.

moto's S3 server (the tests' ``moto_server``) is one Python process that reads a whole object for
every ranged GET, so on it several streams cost more than they bring. s3rver (npm, Node: it
streams a range straight from its file) serves ranges cheaply, and stands for a real store.
Debian's rclone 1.60 has no ``rclone serve s3`` (it came in 1.65).

Loopback has no per-connection limit, so there the streams share only the CPU (two cores here,
with the server and rclone on them): a remote store is different, each connection's throughput is
bounded (round trips, windows, the store's per-request rate), which is why parallel range reads
exist. ``--link-mb`` (default 32) runs s3rver's tables once more behind a proxy in this process that
paces each connection's downloads to that many MB/s, as such a link would.

On each server, one large file and many medium ones are copied to a fresh folder by the node's
own storage tool (``providers/runtime/node_storage.py attach``), once per variant per round, the
variants' order rotating between rounds: ``one stream`` (one transfer, no multi-thread streams),
``default`` (``node_storage.COPY_FLAGS``: what nodes run) and a few other stream counts. Prints
MB/s and the ratio to one stream side by side, then mounts a bucket on moto as ``mode: MOUNT``
does, writes files into it one at a time and times each from its ``close()`` until
``HeadObject`` finds it (p50, p99).

Run from the repository (needs rclone and fuse3; s3rver: ``npm install --prefix ~/.cache/s3rver
s3rver@3.7.1``, or ``--s3rver PATH``): ``python benchmarks/storage_copy.py [--rounds 3]
[--big-mb 256] [--files 64] [--file-mb 4] [--mount-files 50] [--link-mb 32]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from skyhop.providers.runtime import node_storage  # noqa: E402
from skyhop.spec.storage import BucketRef, StorageMode, StoreKind  # noqa: E402
from skyhop.storage.node_commands import attach_entries, rclone_env  # noqa: E402
from skyhop.storage.plan import MountPlan  # noqa: E402
from tests.helpers import free_port, wait_for  # noqa: E402

_ONE_STREAM = ["--transfers=1", "--checkers=1", "--multi-thread-streams=0"]
_VARIANTS: dict[str, list[str] | None] = {
    "one stream": _ONE_STREAM,
    "default": None,
    "4 streams": ["--transfers=4", "--checkers=4", "--multi-thread-streams=4", "--multi-thread-cutoff=32M"],
    "16 streams": [
        "--transfers=16",
        "--checkers=16",
        "--multi-thread-streams=16",
        "--multi-thread-cutoff=16M",
    ],
}
"""Flags of each variant; None is the tool's own (``COPY_FLAGS``)."""
_DEFAULT_S3RVER = Path.home() / ".cache" / "s3rver" / "node_modules" / ".bin" / "s3rver"


def _s3_options(endpoint: str, key: str, secret: str) -> dict[str, str]:
    """rclone's remote for an S3 API at ``endpoint``, as ``S3Store.rclone_config`` gives a non-AWS one."""
    return {
        "type": "s3",
        "provider": "Other",
        "endpoint": endpoint,
        "access_key_id": key,
        "secret_access_key": secret,
        "region": "us-east-1",
        "force_path_style": "true",
    }


@contextlib.contextmanager
def _moto(work: Path) -> Iterator[dict[str, str]]:
    from tests.providers.aws_support import moto_server

    with moto_server(work) as endpoint:
        yield _s3_options(endpoint, "testing", "testing")


@contextlib.contextmanager
def _s3rver(work: Path, binary: Path) -> Iterator[dict[str, str]]:
    port = free_port()
    data = work / "s3rver-data"
    data.mkdir()
    proc = subprocess.Popen(
        [str(binary), "-d", str(data), "-a", "127.0.0.1", "-p", str(port), "-s"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: _answers(port), 30, "s3rver")
        yield _s3_options(f"http://127.0.0.1:{port}", "S3RVER", "S3RVER")
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@contextlib.contextmanager
def _paced(options: dict[str, str], mb_per_s: float) -> Iterator[dict[str, str]]:
    """The server behind a proxy that paces each connection's downloads to ``mb_per_s`` (a burst of
    at most one 64 KB chunk); uploads pass unpaced."""
    upstream = urlsplit(options["endpoint"])
    port, rate = free_port(), mb_per_s * (1 << 20)
    loop = asyncio.new_event_loop()

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, paced: bool) -> None:
        due = time.perf_counter()
        try:
            while data := await reader.read(1 << 16):
                writer.write(data)
                await writer.drain()
                if paced:
                    due = max(due, time.perf_counter()) + len(data) / rate
                    await asyncio.sleep(due - time.perf_counter())
        except OSError:
            pass
        finally:
            writer.close()

    async def serve(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            reader, writer = await asyncio.open_connection(upstream.hostname, upstream.port)
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(pipe(client_reader, writer, False), pipe(reader, client_writer, True))

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(asyncio.start_server(serve, "127.0.0.1", port))
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: _answers(port), 30, "the pacing proxy")
        yield {**options, "endpoint": f"http://127.0.0.1:{port}"}
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)


def _answers(port: int) -> bool:
    import socket

    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        return True
    time.sleep(0.1)
    return False


def _client(options: dict[str, str]) -> Any:
    import boto3

    return boto3.session.Session().client(
        "s3",
        endpoint_url=options["endpoint"],
        aws_access_key_id=options["access_key_id"],
        aws_secret_access_key=options["secret_access_key"],
        region_name="us-east-1",
    )


def _fill(client: Any, work: Path, bucket: str, sizes: list[int]) -> None:
    client.create_bucket(Bucket=bucket)
    src = work / f"src-{bucket}"
    src.mkdir()
    for i, size in enumerate(sizes):
        part = src / f"part{i}.bin"
        with open(part, "wb") as f:
            for _ in range(size):
                f.write(os.urandom(1 << 20))
        client.upload_file(str(part), bucket, f"part{i}.bin")
    shutil.rmtree(src)


def _tool_env(options: dict[str, str], node: Path) -> dict[str, str]:
    env = {**os.environ, **rclone_env(StoreKind.S3, options), "HOME": str(node)}
    env.pop("AWS_CA_BUNDLE", None)
    return env


def _copy(node: Path, bucket: str, options: dict[str, str], flags: list[str] | None) -> float:
    plan = MountPlan(
        target="~/data", mode=StorageMode.COPY, bucket=BucketRef(store=StoreKind.S3, bucket=bucket)
    )
    entries: list[dict[str, Any]] = list(attach_entries([plan]))
    if flags is not None:
        entries[0] = {**entries[0], "copy_flags": flags}
    shutil.rmtree(node, ignore_errors=True)
    node.mkdir(parents=True)
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-I", "-S", node_storage.__file__, "attach", json.dumps(entries)],
        env=_tool_env(options, node),
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - start


def _copy_table(
    name: str,
    work: Path,
    options: dict[str, str],
    sets: dict[str, tuple[str, list[int]]],
    rounds: int,
    fill: bool = True,
) -> None:
    if fill:
        client = _client(options)
        for bucket, sizes in sets.values():
            _fill(client, work, bucket, sizes)
    names = list(_VARIANTS)
    print(f"\nCOPY from {name}, median of {rounds} rounds, MB/s (x one stream):")
    print(f"  {'data':<18}" + "".join(f"{variant:>18}" for variant in names))
    for label, (bucket, sizes) in sets.items():
        timings: dict[str, list[float]] = {variant: [] for variant in names}
        for r in range(rounds):
            for variant in names[r % len(names) :] + names[: r % len(names)]:
                timings[variant].append(_copy(work / "node", bucket, options, _VARIANTS[variant]))
        speed = {variant: sum(sizes) / statistics.median(timings[variant]) for variant in names}
        cells = "".join(f"{speed[v]:>9.0f} ({speed[v] / speed['one stream']:.2f}x)" for v in names)
        print(f"  {label:<18}{cells}")
    shutil.rmtree(work / "node", ignore_errors=True)


def _mount_latency(work: Path, options: dict[str, str], bucket: str, files: int) -> list[float]:
    node = work / "mount-node"
    node.mkdir()
    client = _client(options)
    client.create_bucket(Bucket=bucket)
    plan = MountPlan(
        target="~/m", mode=StorageMode.MOUNT, bucket=BucketRef(store=StoreKind.S3, bucket=bucket)
    )
    tool = [sys.executable, "-I", "-S", node_storage.__file__]
    env = _tool_env(options, node)
    subprocess.run(
        [*tool, "attach", json.dumps(attach_entries([plan]))], env=env, check=True, capture_output=True
    )
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
        subprocess.run([*tool, "detach"], env=env, check=False, capture_output=True)
    return latencies


def main(
    rounds: int, big_mb: int, files: int, file_mb: int, mount_files: int, s3rver: Path, link_mb: float
) -> None:
    import logging

    logging.disable(logging.WARNING)
    work = Path(tempfile.mkdtemp(prefix="skyhop-bench-storage-"))
    os.environ["HOME"] = str(work)
    sets = {
        f"one {big_mb} MB file": ("bench-big", [big_mb]),
        f"{files} x {file_mb} MB": ("bench-many", [file_mb] * files),
    }
    print(f"default = {' '.join(node_storage.COPY_FLAGS)}")
    try:
        if s3rver.exists():
            with _s3rver(work, s3rver) as options:
                _copy_table("s3rver on loopback", work, options, sets, rounds)
                if link_mb > 0:
                    with _paced(options, link_mb) as paced:
                        name = f"s3rver, each connection paced to {link_mb:g} MB/s"
                        _copy_table(name, work, paced, sets, rounds, fill=False)
        else:
            print(f"\n(s3rver not found at {s3rver}: npm install --prefix ~/.cache/s3rver s3rver@3.7.1)")
        with _moto(work) as options:
            logging.getLogger("werkzeug").disabled = True
            _copy_table("moto on loopback", work, options, sets, rounds)
            latencies = sorted(_mount_latency(work, options, "bench-mount", mount_files))
        p50 = statistics.median(latencies)
        p99 = latencies[min(len(latencies) - 1, round(0.99 * (len(latencies) - 1)))]
        print(
            "\nMOUNT on moto, 256 KB files: close() -> object visible: "
            f"p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--big-mb", type=int, default=256)
    parser.add_argument("--files", type=int, default=64)
    parser.add_argument("--file-mb", type=int, default=4)
    parser.add_argument("--mount-files", type=int, default=50)
    parser.add_argument("--s3rver", type=Path, default=_DEFAULT_S3RVER)
    parser.add_argument(
        "--link-mb", type=float, default=32.0, help="per-connection MB/s of the paced run (0: none)"
    )
    args = parser.parse_args()
    main(args.rounds, args.big_mb, args.files, args.file_mb, args.mount_files, args.s3rver, args.link_mb)
