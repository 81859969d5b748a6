"""Log latency: a line written on a node until the CLI prints it, through the store vs read from the node.

Measured side by side in one run, on an embedded skyhop (local provider, folder store) with its
own HOME and ports. A job writes ``--lines`` lines at random gaps (``--gap-min`` to ``--gap-max``
seconds, so lines arrive while the watcher is at every point of its poll backoff), each carrying
the time it was written; two followers read the same job at once:

- store: the ``skyhop logs CLUSTER JOB`` process, which reads what the worker's job watcher ships
  to the store (its poll: at most ``LOG_POLL_S`` apart while there is output, ``POLL_MAX_S`` when
  quiet; then the CLI's own LIST every 0.02-0.25 s);
- node: the direct read of before, from the node's log file through the provider's runtime
  (``NodeLogTail``, at the old follower's 0.02-0.5 s backoff), which needs node access.

Latency of a line = when the follower got it - when the job wrote it (one machine, one clock).
The job writes its lines once both followers have printed its first one (their start-up is left out).

    python benchmarks/log_latency.py [--lines 150] [--gap-min 0.05] [--gap-max 0.6] [--store s3]

``--store s3``: the store is a bucket on moto's S3 server (loopback, in this process; the test extra).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

_WRITER = """
import os, random, sys, time
print("ready", flush=True)
while not os.path.exists({gate!r}):
    time.sleep(0.01)
for i in range({lines}):
    time.sleep(random.uniform({low}, {high}))
    print(f"line {{i}} {{time.time():.6f}}", flush=True)
"""


def _latency(line: bytes, got: float) -> float | None:
    parts = line.split()
    if len(parts) != 3 or parts[0] != b"line":
        return None
    return got - float(parts[2])


async def _through_store(
    skyhop: str, env: dict[str, str], job: int, lines: int, ready: asyncio.Event
) -> list[float]:
    proc = await asyncio.create_subprocess_exec(
        skyhop, "logs", "bench", str(job), env=env, stdout=asyncio.subprocess.PIPE
    )
    assert proc.stdout is not None
    found: list[float] = []
    while len(found) < lines:
        line = await proc.stdout.readline()
        if not line:
            break
        if line == b"ready\n":
            ready.set()
        latency = _latency(line, time.time())
        if latency is not None:
            found.append(latency)
    await proc.wait()
    return found


class _Stamped:
    """A ``NodeLogTail`` output that notes when each whole line arrived."""

    def __init__(self) -> None:
        self.found: list[float] = []
        self.rest = b""
        self.ready = asyncio.Event()

    def write(self, data: bytes) -> int:
        got = time.time()
        lines = (self.rest + data).split(b"\n")
        self.rest = lines.pop()
        for line in lines:
            if line == b"ready":
                self.ready.set()
            latency = _latency(line, got)
            if latency is not None:
                self.found.append(latency)
        return len(data)

    def flush(self) -> None:
        pass


async def _from_node(address: str, job: int, lines: int, out: _Stamped) -> list[float]:
    from skyhop.cli.client import connect
    from skyhop.cli.config import TemporalConfig
    from skyhop.cli.logs import NodeLogTail, find_job

    client = await connect(TemporalConfig(), address)
    record, found = await find_job(client, "bench", job)
    while record.handle is None or not found.placement:
        await asyncio.sleep(0.05)
        record, found = await find_job(client, "bench", job)
    tail = NodeLogTail(found.handle_in(record.handle), found.key, 1, out)  # type: ignore[arg-type]
    poll = 0.02
    while len(out.found) < lines:
        wrote = await tail.pump()
        poll = 0.02 if wrote else min(poll * 1.5, 0.5)
        await asyncio.sleep(poll)
    return out.found


def _figures(name: str, found: list[float]) -> str:
    ordered = sorted(found)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return (
        f"{name:<32} p50 {statistics.median(ordered) * 1000:6.0f} ms   p99 {p99 * 1000:6.0f} ms"
        f"   max {ordered[-1] * 1000:6.0f} ms   ({len(ordered)} lines)"
    )


def _moto_store() -> None:
    """moto's S3 on loopback (a thread of this process) as the store of the CLI and the worker."""
    import logging

    import boto3
    from moto.server import ThreadedMotoServer

    from tests.helpers import free_port

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's per-request lines
    port = free_port()
    ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False).start()
    endpoint = f"http://127.0.0.1:{port}"
    os.environ.update(
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION="us-east-1",
        SKYHOP_STORE_URL="s3://bench/skyhop",
        SKYHOP_STORE_ENDPOINT_URL=endpoint,
    )
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket="bench")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lines", type=int, default=150)
    parser.add_argument("--gap-min", type=float, default=0.05)
    parser.add_argument("--gap-max", type=float, default=0.6)
    parser.add_argument("--store", choices=["folder", "s3"], default="folder")
    args = parser.parse_args()
    from tests.helpers import SKYHOP_CLI as skyhop
    from tests.helpers import embedded_skyhop

    if args.store == "s3":
        _moto_store()
    with embedded_skyhop(Path(tempfile.mkdtemp(prefix="skyhop-bench-"))) as env:
        env.update({k: v for k, v in os.environ.items() if k.startswith("SKYHOP_STORE_")})
        subprocess.run(
            [skyhop, "launch", "-y", "-c", "bench", "echo ready"], env=env, check=True, capture_output=True
        )
        gate = Path(env["SKYHOP_HOME"]) / "bench-gate"
        writer = _WRITER.format(lines=args.lines, low=args.gap_min, high=args.gap_max, gate=str(gate))
        script = f"python3 - <<'EOF'\n{writer}\nEOF"
        subprocess.run([skyhop, "exec", "-d", "bench", script], env=env, check=True, capture_output=True)
        os.environ.update(env)  # the direct read finds the local nodes under this home
        address = f"127.0.0.1:{env['SKYHOP_SERVER_PORT']}"

        async def both() -> list[list[float]]:
            ready, node_out = asyncio.Event(), _Stamped()
            followers = asyncio.gather(
                _through_store(skyhop, env, 2, args.lines, ready),
                _from_node(address, 2, args.lines, node_out),
            )
            # The lines are written once both followers are attached: the figures leave out start-up.
            await ready.wait()
            await node_out.ready.wait()
            gate.touch()
            return await followers

        store, node = asyncio.run(both())
        subprocess.run([skyhop, "down", "-y", "bench"], env=env, capture_output=True)
    where = "embedded default" + (", S3 store on moto" if args.store == "s3" else ", folder store")
    print(f"log latency, line written on a node -> printed by the CLI ({args.lines} lines, {where})")
    print(_figures("through the store (skyhop logs)", store))
    print(_figures("direct read of the node (before)", node))


if __name__ == "__main__":
    main()
