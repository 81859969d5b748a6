"""A SkyPilot service YAML, unchanged, on ``sim`` nodes that are separate machines: every replica
listens on the port the YAML names (8080) at its own address (a network namespace on a test bridge),
the load balancer on this machine reaches each there, a killed replica is replaced with no failed
request and no request sent to it after it was seen failing, and ``serve down`` leaves nothing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from skyhop.providers.sim import SimCloud
from skyhop.providers.sim.network import kill_all
from tests.conftest import skyhop
from tests.helpers import WorkerProcess, wait_for
from tests.netns import Bridge, can_netns
from tests.providers.sim_support import enabled_sim, write_plan
from tests.serve.service_cli import Client, check_replaced, get, ready_replicas, replaced, status

pytestmark = pytest.mark.skipif(not can_netns(), reason="needs network namespaces (root, iproute2)")

REPO = Path(__file__).resolve().parents[2]

SERVICE_YAML = """\
resources:
  infra: sim
  ports: 8080
service:
  replicas: 2
  readiness_probe:
    path: /
    initial_delay_seconds: 60
    timeout_seconds: 5
run: |
  cd {repo}
  exec {python} -m tests.serve.replica_app --host 0.0.0.0 --port 8080
"""
"""SkyPilot's form (the name comes from ``-n``): every replica listens on 8080, on all its addresses."""

CLIENT_HEADER = "X-Test-Client"

SENTINEL = """\
import socket, sys, time
log = open(sys.argv[1], "a", buffering=1)
for _ in range(200):
    try:
        server = socket.create_server(("0.0.0.0", 8080))
        break
    except OSError:
        time.sleep(0.05)
print("listening", flush=True)
while True:
    conn, _ = server.accept()
    conn.settimeout(5)
    head = b""
    try:
        while b"\\r\\n\\r\\n" not in head:
            part = conn.recv(4096)
            if not part:
                break
            head += part
    except OSError:
        pass
    if b"x-test-client" in head.lower():
        log.write(f"client {time.time()}\\n")
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x00")
    else:
        log.write(f"other {time.time()}\\n")
        conn.sendall(b"HTTP/1.1 503 Service Unavailable\\r\\nContent-Length: 0\\r\\n\\r\\n")
    conn.close()
"""
"""Takes the killed replica's address and port: records each request the load balancer still sends
there (and resets it without a byte, which the load balancer retries elsewhere); 503 to anything else."""


def _count(host: str) -> int:
    """Requests a replica has seen, asked at its own address."""
    status_code, body = get(f"http://{host}:8080/count")
    assert status_code == 200
    return int(body)


def _namespaces(prefix: str) -> list[str]:
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in listed.splitlines() if line.startswith(prefix)]


def test_a_skypilot_service_on_sim_machines_of_their_own(
    live_worker: WorkerProcess, cli_env: dict[str, str], tmp_path: Path
) -> None:
    name = f"web-{uuid.uuid4().hex[:6]}"
    spec = tmp_path / "service.yaml"
    spec.write_text(SERVICE_YAML.format(repo=REPO, python=sys.executable))
    bridge = Bridge(prefix="10.201", kind="sv")
    cloud = SimCloud()
    prefix = cloud.netns("")
    sentinel: subprocess.Popen[bytes] | None = None
    began = time.monotonic()
    with enabled_sim(tmp_path) as catalog:
        try:
            bridge.create()
            write_plan(catalog, [], bridge=bridge.name)
            up = skyhop("serve", "up", str(spec), "-n", name, "-y", env=cli_env)
            assert up.returncode == 0, up.stderr
            endpoint = up.stdout.strip().removeprefix("Endpoint: ")

            # READY within the probe settings (initial_delay_seconds: 60, probes every 10 s).
            wait_for(lambda: len(ready_replicas(status(cli_env, name))) == 2, 90, "two READY replicas")
            print(f"serve up to two READY replicas on sim: {time.monotonic() - began:.1f} s")
            replicas = ready_replicas(status(cli_env, name))
            hosts = [str(r["host"]) for r in replicas]
            assert [r["port"] for r in replicas] == [8080, 8080]
            assert len(set(hosts)) == 2 and all(h.startswith(bridge.subnet + ".") for h in hosts), hosts

            # Through the endpoint, requests reach both machines.
            with Client(endpoint) as first, Client(endpoint) as second:
                wait_for(lambda: min(map(_count, hosts)) >= 5, 60, "requests on both replicas")
            assert first.failures == second.failures == []

            victim, survivor = replicas
            (instance,) = cloud.describe(f"{name}-replica-{victim['replica_id']}")
            assert instance["address"] == victim["host"]
            seen_failing = 0.0
            with Client(endpoint, {CLIENT_HEADER: "1"}) as client:
                killed_at = time.monotonic()
                kill_all(instance["netns"])  # the machine's every process: runner and app
                log = tmp_path / "sentinel.log"
                argv = ["ip", "netns", "exec", instance["netns"], sys.executable, "-c", SENTINEL, str(log)]
                sentinel = subprocess.Popen(argv, stdout=subprocess.PIPE)
                assert sentinel.stdout is not None and sentinel.stdout.readline() == b"listening\n"

                def victim_out() -> bool:
                    ids = {r["replica_id"] for r in ready_replicas(status(cli_env, name))}
                    return victim["replica_id"] not in ids

                wait_for(victim_out, 60, "the killed replica to leave READY")
                seen_failing = time.time()

                wait_for(lambda: replaced(cli_env, name, victim["replica_id"]), 120, "a READY replacement")
                print(f"replica death to replacement READY: {time.monotonic() - killed_at:.1f} s")
            ready = check_replaced(cli_env, name, client, survivor["replica_id"], {"replica 0"})
            assert [r["port"] for r in ready] == [8080, 8080]
            # Requests the load balancer sent the dead machine while it still counted as READY were
            # reset there and retried elsewhere (no client saw them fail); once its failure was seen,
            # allowing the 1 s the push to the load balancer may take, none went there.
            sent = [
                float(line.split()[1]) for line in log.read_text().splitlines() if line.startswith("client")
            ]
            assert [t for t in sent if t > seen_failing + 1.0] == [], (sent, seen_failing)
            print(f"requests the dead replica was sent before it was seen failing: {len(sent)}")
        finally:
            began = time.monotonic()
            down = skyhop("serve", "down", name, "-y", env=cli_env)
            print(f"serve down: {time.monotonic() - began:.1f} s")
            if sentinel is not None:
                if sentinel.poll() is None:
                    os.kill(sentinel.pid, signal.SIGKILL)
                sentinel.wait()
            left = _namespaces(prefix)
            for netns in left:
                kill_all(netns)
                subprocess.run(["ip", "netns", "del", netns], capture_output=True)
            bridge.delete()
    assert down.returncode == 0, down.stderr
    assert left == []
    assert list((Path(os.environ["SKYHOP_HOME"]) / "clusters").glob(f"{name}-replica-*")) == []
    assert [i for i in cloud.describe() if i["cluster"].startswith(f"{name}-")] == []
