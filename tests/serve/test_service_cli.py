"""A service on the ``local`` provider, through the CLI: up, answers through its load balancer, a
killed replica is replaced while the endpoint keeps answering, logs, down leaves nothing.

One service for every assertion (each replica is ``python -m http.server`` on the port it was given).
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

from tests.conftest import skyhop
from tests.helpers import WorkerProcess, wait_for

SERVICE_YAML = """\
name: {name}
service:
  readiness_probe:
    path: /
    initial_delay_seconds: 60
    timeout_seconds: 5
    endpoint_probe_interval_seconds: 0.5
    consecutive_failure_threshold_timeout: 2
  replicas: 2
resources:
  infra: local
run: |
  echo $$ > {pids}/$SKYHOP_SERVE_PORT.pid
  exec python3 -m http.server $SKYHOP_SERVE_PORT --bind 127.0.0.1
"""


def _status(env: dict[str, str], name: str) -> dict[str, object]:
    result = skyhop("serve", "status", name, "--json", env=env)
    assert result.returncode == 0, result.stderr
    (item,) = json.loads(result.stdout)["items"]
    assert isinstance(item, dict)
    return item


def _ready(item: dict[str, object]) -> list[dict[str, object]]:
    replicas = item["replicas"]
    assert isinstance(replicas, list)
    return [r for r in replicas if r["status"] == "READY"]


def _get(endpoint: str) -> int:
    parts = urlsplit(endpoint)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    try:
        connection.request("GET", "/")
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_serve_up_kill_a_replica_then_down(
    live_worker: WorkerProcess, cli_env: dict[str, str], tmp_path: Path
) -> None:
    name = f"web-{uuid.uuid4().hex[:6]}"
    pids = tmp_path / "pids"
    pids.mkdir()
    spec = tmp_path / "service.yaml"
    spec.write_text(SERVICE_YAML.format(name=name, pids=pids))

    began = time.monotonic()
    up = skyhop("serve", "up", str(spec), "-y", env=cli_env)
    assert up.returncode == 0, up.stderr
    endpoint = up.stdout.strip().removeprefix("Endpoint: ")
    assert endpoint.startswith("http://127.0.0.1:")

    try:
        wait_for(lambda: len(_ready(_status(cli_env, name))) == 2, 90, "two READY replicas")
        assert _get(endpoint) == 200
        print(f"serve up to two READY replicas: {time.monotonic() - began:.1f} s")
        item = _status(cli_env, name)
        assert item["status"] == "READY" and item["endpoint"] == endpoint
        lb = item["load_balancer"]
        assert isinstance(lb, dict)
        victim, survivor = _ready(item)

        # A client sends requests throughout; the load balancer retries a refused one elsewhere.
        failures: list[str] = []
        answered = [0]
        stop = threading.Event()

        def client() -> None:
            while not stop.is_set():
                try:
                    status = _get(endpoint)
                except OSError as exc:
                    failures.append(repr(exc))
                    continue
                if status != 200:
                    failures.append(f"status {status}")
                answered[0] += 1

        sender = threading.Thread(target=client)
        sender.start()
        try:
            victim_pid = int((pids / f"{victim['port']}.pid").read_text())
            killed_at = time.monotonic()
            os.kill(victim_pid, signal.SIGKILL)

            def replaced() -> bool:
                ready = _ready(_status(cli_env, name))
                ids = {r["replica_id"] for r in ready}
                return len(ready) == 2 and victim["replica_id"] not in ids

            wait_for(replaced, 90, "the killed replica to be replaced by a READY one")
            replaced_after = time.monotonic() - killed_at
            print(f"replica death to replacement READY: {replaced_after:.1f} s")
        finally:
            stop.set()
            sender.join()
        assert failures == [], failures[:5]
        assert answered[0] > 0
        after = _status(cli_env, name)
        assert after["replaced"] == 1
        assert survivor["replica_id"] in {r["replica_id"] for r in _ready(after)}

        logs = skyhop("serve", "logs", name, "--replica", str(survivor["replica_id"]), env=cli_env)
        assert logs.returncode == 0, logs.stderr
        assert '"GET / HTTP/1.1" 200' in logs.stdout
        lb_log = skyhop("serve", "logs", name, "--load-balancer", env=cli_env)
        assert lb_log.returncode == 0 and "replica set" in lb_log.stdout
    finally:
        began = time.monotonic()
        down = skyhop("serve", "down", name, "-y", env=cli_env)
        print(f"serve down: {time.monotonic() - began:.1f} s")
    assert down.returncode == 0, down.stderr
    assert not _alive(int(lb["pid"]))
    assert [p for p in pids.glob("*.pid") if _alive(int(p.read_text()))] == []
    clusters = Path(os.environ["SKYHOP_HOME"]) / "clusters"
    assert list(clusters.glob(f"{name}-replica-*")) == []
    gone = skyhop("serve", "status", name, env=cli_env)
    assert gone.returncode == 1 and f"service {name!r} not found" in gone.stderr
    listing = skyhop("serve", "status", "--json", env=cli_env)
    assert name not in {item["name"] for item in json.loads(listing.stdout)["items"]}
