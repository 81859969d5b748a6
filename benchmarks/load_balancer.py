"""skyhop's load balancer next to nginx and a SkyServe-style FastAPI + httpx proxy, on 2 local replicas.

In one run, with Debian's ``wrk`` as the load generator (keep-alive connections, ``GET /``):
- direct: straight to one replica (the floor);
- skyhop: ``python -m skyhop.serve.load_balancer`` (least_load) over both replicas;
- nginx: Debian's nginx as a plain reverse proxy to both (one worker, upstream keep-alive);
- fastapi: ``benchmarks/skyserve_style_proxy.py``, FastAPI forwarding through an ``httpx.AsyncClient``
  per replica with ``stream=True`` and a ``StreamingResponse``, as SkyServe's load balancer does.

Each target gets, per round, a throughput run (``--connections`` at once) and a latency run
(``--latency-connections`` at once, so queueing does not hide the proxy's own cost); rounds
interleave the targets, and the medians are shown. Then the time from a replica-set push to
the load balancer acting on it: push a set, time until a request is served by it.

Targets (issue 16): skyhop adds under 1 ms p50 and under 5 ms p99, reaches at least 50% of
nginx's requests/s and at least 3x the FastAPI proxy's, on the same 2 cores.

    apt-get install wrk nginx; pip install -e '.[bench]'
    python benchmarks/load_balancer.py [--seconds 5] [--rounds 3] [--connections 64] [--latency-connections 4]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3}


def _nginx_conf(folder: Path, port: int, replica_ports: list[int]) -> Path:
    servers = "\n".join(f"    server 127.0.0.1:{p};" for p in replica_ports)
    conf = folder / "nginx.conf"
    conf.write_text(
        f"""worker_processes 1;
daemon off;
pid {folder}/nginx.pid;
error_log {folder}/nginx.err warn;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  client_body_temp_path {folder}/body; proxy_temp_path {folder}/proxy;
  fastcgi_temp_path {folder}/fcgi; uwsgi_temp_path {folder}/uwsgi; scgi_temp_path {folder}/scgi;
  upstream replicas {{
{servers}
    least_conn;
    keepalive 64;
  }}
  server {{
    listen 127.0.0.1:{port};
    location / {{
      proxy_pass http://replicas;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }}
  }}
}}
"""
    )
    return conf


def _wait_http(port: int, deadline_s: float = 30.0) -> None:
    import http.client

    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            connection.request("GET", "/")
            if connection.getresponse().status == 200:
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing answered on port {port} within {deadline_s}s")


@contextmanager
def _process(argv: list[str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    from skyhop.serve.launch import stop_process

    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=REPO)
    try:
        yield proc
    finally:
        stop_process(proc)


def _wrk(port: int, seconds: int, connections: int) -> tuple[float, float, float]:
    """requests/s, p50 ms, p99 ms."""
    out = subprocess.run(
        ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency", f"http://127.0.0.1:{port}/"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    if "Non-2xx" in out or "Socket errors" in out:
        print(f"wrk saw errors on port {port}:\n{out}", file=sys.stderr)
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]

    def percentile(p: str) -> float:
        value, unit = re.search(rf"\s{p}%\s+([\d.]+)(us|ms|s)", out).groups()  # type: ignore[union-attr]
        return float(value) * _UNITS[unit]

    return rps, percentile("50"), percentile("99")


async def _push_to_act(
    control_port: int, token: str, lb_port: int, replica_ports: list[int], rounds: int
) -> list[float]:
    """Seconds from the start of a push to the first request the new set serves."""
    from skyhop.contract.serve import ReplicaEndpoint
    from skyhop.serve.control_client import LoadBalancerControl

    control = LoadBalancerControl(control_port, token)
    endpoints = [ReplicaEndpoint(replica_id=i, host="127.0.0.1", port=p) for i, p in enumerate(replica_ports)]
    times = []
    for n in range(rounds):
        only = endpoints[n % 2]
        started = time.perf_counter()
        await control.push([only])
        while True:
            reader, writer = await asyncio.open_connection("127.0.0.1", lb_port)
            writer.write(b"GET /id HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            answer = await reader.read()
            writer.close()
            if answer.endswith(f"replica {only.replica_id}".encode()):
                break
        times.append(time.perf_counter() - started)
    await control.push(endpoints)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=5, help="per wrk run")
    parser.add_argument("--rounds", type=int, default=3, help="runs per target, interleaved; medians shown")
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--latency-connections", type=int, default=4)
    parser.add_argument("--targets", default="direct,skyhop,nginx,fastapi", help="comma-separated subset")
    args = parser.parse_args()
    before = os.getloadavg()
    missing = [
        tool
        for tool in ("wrk", "nginx")
        if shutil.which(tool, path=os.environ["PATH"] + ":/usr/sbin") is None
    ]
    if missing:
        sys.exit(f"needs {' and '.join(missing)}: apt-get install {' '.join(missing)}")
    if "fastapi" in args.targets.split(",") and importlib.util.find_spec("fastapi") is None:
        sys.exit("the fastapi target needs the bench extra: pip install -e '.[bench]'")
    from skyhop.cli.embedded import free_port
    from skyhop.serve.control import create_token_file
    from skyhop.serve.launch import LoadBalancerProcess

    nginx = shutil.which("nginx", path=os.environ["PATH"] + ":/usr/sbin")
    assert nginx is not None
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        ports = [free_port(), free_port()]
        py = sys.executable
        with (
            _process(
                [py, "-m", "tests.serve.replica_app", "--port", str(ports[0]), "--id", "0"], folder / "r0.log"
            ),
            _process(
                [py, "-m", "tests.serve.replica_app", "--port", str(ports[1]), "--id", "1"], folder / "r1.log"
            ),
        ):
            for port in ports:
                _wait_http(port)
            token_file = folder / "lb.token"
            token = create_token_file(token_file)
            nginx_port, fastapi_port = free_port(), free_port()
            conf = _nginx_conf(folder, nginx_port, ports)
            with (
                LoadBalancerProcess.start(token_file, folder / "lb.log") as lb,
                _process([nginx, "-c", str(conf)], folder / "nginx.log"),
                _process(
                    [
                        py,
                        str(REPO / "benchmarks/skyserve_style_proxy.py"),
                        str(fastapi_port),
                        *map(str, ports),
                    ],
                    folder / "fastapi.log",
                ),
            ):
                from skyhop.contract.serve import ReplicaEndpoint
                from skyhop.serve.control_client import LoadBalancerControl

                endpoints = [
                    ReplicaEndpoint(replica_id=i, host="127.0.0.1", port=p) for i, p in enumerate(ports)
                ]
                asyncio.run(LoadBalancerControl(lb.control_port, token).push(endpoints))
                targets = {
                    "direct": ports[0],
                    "skyhop": lb.port,
                    "nginx": nginx_port,
                    "fastapi": fastapi_port,
                }
                for port in targets.values():
                    _wait_http(port)
                targets = {name: targets[name] for name in args.targets.split(",")}
                for port in targets.values():
                    _wrk(port, 1, args.connections)  # warm up connections and caches
                runs: dict[str, list[tuple[float, float, float]]] = {name: [] for name in targets}
                # Rounds interleave the targets, so a neighbour's burst on the shared machine hits all.
                for round_ in range(args.rounds):
                    for name, port in targets.items():
                        print(f"round {round_ + 1}: {name} on port {port}", file=sys.stderr)
                        rps = _wrk(port, args.seconds, args.connections)[0]
                        _, p50, p99 = _wrk(port, args.seconds, args.latency_connections)
                        runs[name].append((rps, p50, p99))
                        print(f"  {rps:.0f} req/s, p50 {p50:.3f} ms, p99 {p99:.3f} ms", file=sys.stderr)
                results = {
                    name: tuple(statistics.median(run[i] for run in each) for i in range(3))
                    for name, each in runs.items()
                }
                push = asyncio.run(_push_to_act(lb.control_port, token, lb.port, ports, 20))
    after = os.getloadavg()
    print(f"2 replicas (tests/serve/replica_app.py under uvloop), wrk -t1, {os.cpu_count()} cores")
    print(f"load average (1 min) before {before[0]:.2f}, after {after[0]:.2f}: the machine is shared")
    c, lc = args.connections, args.latency_connections
    header = f"{'target':<9} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8}"
    print(f"{header}   (req/s at -c{c}; latency at -c{lc}; medians of {args.rounds} rounds)")
    for name, (rps, p50, p99) in results.items():
        print(f"{name:<9} {rps:>9.0f} {p50:>8.3f} {p99:>8.3f}")
    if len(results) == 4:
        direct, skyhop, ng, fa = (results[k] for k in ("direct", "skyhop", "nginx", "fastapi"))
        p50, p99 = skyhop[1] - direct[1], skyhop[2] - direct[2]
        print(f"skyhop adds p50 {p50:+.3f} ms (target < 1), p99 {p99:+.3f} ms (< 5)")
        of_nginx, of_fastapi = skyhop[0] / ng[0], skyhop[0] / fa[0]
        print(
            f"skyhop: {of_nginx:.0%} of nginx's req/s (>= 50%), {of_fastapi:.1f}x the FastAPI proxy's (>= 3x)"
        )
    median, worst = statistics.median(push) * 1000, max(push) * 1000
    print(f"push -> acting on it: median {median:.1f} ms, max {worst:.1f} ms over {len(push)} pushes (< 1 s)")


if __name__ == "__main__":
    main()
