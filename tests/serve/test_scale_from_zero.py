"""Scale from zero on the ``local`` provider, through the CLI: a service of ``min_replicas: 0``
comes up with no replica; the first request is held by the load balancer, a replica is launched
because of it and answers it (200, not a 503); with no traffic it scales back to zero, its cluster
removed; the next request brings a replica back the same way.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

from skyhop.workflows.service import AUTOSCALE_EVERY
from tests.conftest import skyhop
from tests.helpers import WorkerProcess, wait_for
from tests.serve.service_cli import alive, get, status

REPO = Path(__file__).resolve().parents[2]
SERVICE_YAML = """\
name: {name}
service:
  readiness_probe:
    path: /
    initial_delay_seconds: 60
    timeout_seconds: 5
    endpoint_probe_interval_seconds: 0.5
  replica_policy:
    min_replicas: 0
    max_replicas: 1
    target_qps_per_replica: 100
    upscale_delay_seconds: 0
    downscale_delay_seconds: 1
resources:
  infra: local
run: |
  echo $$ > {pids}/$SKYHOP_SERVE_PORT.pid
  cd {repo} && exec {python} -m tests.serve.replica_app --port $SKYHOP_SERVE_PORT --id $SKYHOP_SERVE_PORT
"""
HOLD_S = 120.0
"""The load balancer's default hold (``ProxyTimeouts.hold``): the client waits as long."""


class FirstRequest:
    """``GET /`` sent in a thread, so the test can watch the service while the request is held."""

    def __init__(self, endpoint: str) -> None:
        self.answer: tuple[int, str] | None = None
        self.error: BaseException | None = None
        self.sent_at = time.time()
        self.answered_at = 0.0
        self._thread = threading.Thread(target=self._send, args=(endpoint,))
        self._thread.start()

    def _send(self, endpoint: str) -> None:
        try:
            self.answer = get(endpoint, timeout=HOLD_S + 30)
            self.answered_at = time.time()
        except BaseException as exc:  # reported by the test's thread
            self.error = exc

    def result(self) -> tuple[int, str]:
        self._thread.join(HOLD_S + 60)
        assert self.error is None and self.answer is not None, self.error
        return self.answer


def _replicas(env: dict[str, str], name: str) -> list[dict[str, object]]:
    replicas = status(env, name)["replicas"]
    assert isinstance(replicas, list)
    return replicas


def _serve_from_zero(env: dict[str, str], name: str, endpoint: str) -> dict[str, object]:
    """One request while no replica runs: held, a replica launched for it, answered by it."""
    assert _replicas(env, name) == []
    request = FirstRequest(endpoint)
    status_code, body = request.result()
    (ready,) = _replicas(env, name)
    assert ready["status"] == "READY"
    assert (status_code, body) == (200, f"replica {ready['port']}")  # the new replica answered it
    # Launched after the request came (workflow time is wall time), answered once READY: held.
    launched = float(str(ready["launched_at"])) - request.sent_at
    ready_at = float(str(ready["ready_at"])) - request.sent_at
    answered = request.answered_at - request.sent_at
    print(
        f"request to replica launched: {launched:.1f} s, READY: {ready_at:.1f} s, answered: {answered:.1f} s"
    )
    assert 0 <= launched < AUTOSCALE_EVERY.total_seconds()  # woken by the request, not the 20 s tick
    assert launched <= ready_at <= answered + 0.5  # clocks: the worker's and this process's, same host
    return ready


def test_min_replicas_0_holds_the_first_request_until_a_replica_serves_it_then_scales_to_zero(
    live_worker: WorkerProcess, cli_env: dict[str, str], tmp_path: Path
) -> None:
    name = f"zero-{uuid.uuid4().hex[:6]}"
    pids = tmp_path / "pids"
    pids.mkdir()
    spec = tmp_path / "service.yaml"
    spec.write_text(SERVICE_YAML.format(name=name, pids=pids, repo=REPO, python=sys.executable))
    clusters = Path(os.environ["SKYHOP_HOME"]) / "clusters"

    began = time.monotonic()
    up = skyhop("serve", "up", str(spec), "-y", env=cli_env)
    assert up.returncode == 0, up.stderr
    endpoint = up.stdout.strip().removeprefix("Endpoint: ")
    try:
        item = status(cli_env, name)
        assert item["target"] == 0 and item["replicas"] == [] and item["endpoint"] == endpoint
        parts = urlsplit(endpoint)
        socket.create_connection((parts.hostname or "", parts.port or 0), timeout=10).close()

        first = _serve_from_zero(cli_env, name, endpoint)
        assert list(clusters.glob(f"{name}-replica-*")) != []

        # No traffic: once the load balancer's 60 s window is empty and the downscale delay passed,
        # back to zero, the replica's cluster and process gone.
        idle = time.monotonic()
        wait_for(lambda: _replicas(cli_env, name) == [], 180, "scaled back to zero")
        print(f"last request to zero replicas: {time.monotonic() - idle:.1f} s")
        assert status(cli_env, name)["target"] == 0
        assert list(clusters.glob(f"{name}-replica-*")) == []
        assert not alive(int((pids / f"{first['port']}.pid").read_text()))

        second = _serve_from_zero(cli_env, name, endpoint)  # and again, from zero
        assert second["replica_id"] != first["replica_id"]
        print(f"whole scenario: {time.monotonic() - began:.1f} s")
    finally:
        down = skyhop("serve", "down", name, "-y", env=cli_env)
    assert down.returncode == 0, down.stderr
    assert list(clusters.glob(f"{name}-replica-*")) == []
