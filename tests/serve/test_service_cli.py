"""A service on the ``local`` provider, through the CLI: up, answers through its load balancer, a
killed replica is replaced while the endpoint keeps answering, logs, down leaves nothing.

One service for every assertion (each replica is ``python -m http.server`` on the port it was given).
"""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from pathlib import Path

from tests.conftest import skyhop
from tests.helpers import WorkerProcess, wait_for
from tests.serve.service_cli import Client, alive, check_replaced, get, ready_replicas, replaced, status

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
  mkdir -p site && echo {version} > site/index.html && cd site
  echo $$ > {pids}/$SKYHOP_SERVE_PORT.pid
  exec python3 -m http.server $SKYHOP_SERVE_PORT --bind 127.0.0.1
"""


def test_serve_up_kill_a_replica_then_down(
    live_worker: WorkerProcess, cli_env: dict[str, str], tmp_path: Path
) -> None:
    name = f"web-{uuid.uuid4().hex[:6]}"
    pids = tmp_path / "pids"
    pids.mkdir()
    spec = tmp_path / "service.yaml"
    spec.write_text(SERVICE_YAML.format(name=name, pids=pids, version="v1"))

    began = time.monotonic()
    up = skyhop("serve", "up", str(spec), "-y", env=cli_env)
    assert up.returncode == 0, up.stderr
    endpoint = up.stdout.strip().removeprefix("Endpoint: ")
    assert endpoint.startswith("http://127.0.0.1:")

    try:
        wait_for(lambda: len(ready_replicas(status(cli_env, name))) == 2, 90, "two READY replicas")
        assert get(endpoint) == (200, "v1")
        print(f"serve up to two READY replicas: {time.monotonic() - began:.1f} s")
        item = status(cli_env, name)
        assert item["status"] == "READY" and item["endpoint"] == endpoint
        lb = item["load_balancer"]
        assert isinstance(lb, dict)
        victim, survivor = ready_replicas(item)

        # A client sends requests throughout; the load balancer retries a refused one elsewhere.
        with Client(endpoint) as client:
            victim_pid = int((pids / f"{victim['port']}.pid").read_text())
            killed_at = time.monotonic()
            os.kill(victim_pid, signal.SIGKILL)

            wait_for(lambda: replaced(cli_env, name, victim["replica_id"]), 90, "a READY replacement")
            print(f"replica death to replacement READY: {time.monotonic() - killed_at:.1f} s")
        check_replaced(cli_env, name, client, survivor["replica_id"], {"v1"})

        logs = skyhop("serve", "logs", name, str(survivor["replica_id"]), env=cli_env)
        assert logs.returncode == 0, logs.stderr
        assert '"GET / HTTP/1.1" 200' in logs.stdout
        lb_log = skyhop("serve", "logs", name, "--load-balancer", env=cli_env)
        assert lb_log.returncode == 0 and "replica set" in lb_log.stdout

        # A rolling update with requests throughout: none fails, and v2 serves them all at the end.
        new = tmp_path / "service-v2.yaml"
        new.write_text(SERVICE_YAML.format(name=name, pids=pids, version="v2"))
        with Client(endpoint) as client:
            began = time.monotonic()
            update = skyhop("serve", "update", name, str(new), env=cli_env)
            assert update.returncode == 0, update.stderr

            def rolled() -> bool:
                item = status(cli_env, name)
                replicas = item["replicas"]
                assert isinstance(replicas, list)
                versions = [r["version"] for r in replicas]
                return versions == [2, 2] and len(ready_replicas(item)) == 2

            wait_for(rolled, 90, "both replicas on version 2")
            print(f"rolling update of 2 replicas: {time.monotonic() - began:.1f} s")
        assert client.failures == [], client.failures[:5]
        assert client.answers[-1] == "v2" and set(client.answers) <= {"v1", "v2"}
    finally:
        began = time.monotonic()
        down = skyhop("serve", "down", name, "-y", env=cli_env)
        print(f"serve down: {time.monotonic() - began:.1f} s")
    assert down.returncode == 0, down.stderr
    assert not alive(int(lb["pid"]))
    assert [p for p in pids.glob("*.pid") if alive(int(p.read_text()))] == []
    clusters = Path(os.environ["SKYHOP_HOME"]) / "clusters"
    assert list(clusters.glob(f"{name}-replica-*")) == []
    gone = skyhop("serve", "status", name, env=cli_env)
    assert gone.returncode == 1 and f"service {name!r} not found" in gone.stderr
    listing = skyhop("serve", "status", "--json", env=cli_env)
    assert name not in {item["name"] for item in json.loads(listing.stdout)["items"]}


def test_a_task_without_a_service_section_is_refused_before_anything_starts(
    cli_env: dict[str, str], tmp_path: Path
) -> None:
    spec = tmp_path / "plain.yaml"
    spec.write_text("run: echo hi\nresources:\n  infra: local\n")
    refused = skyhop("serve", "up", str(spec), "-y", "-n", "plain", env=cli_env)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert refused.stderr.strip().splitlines() == [
        "Error: service: a service needs a 'service:' section (readiness_probe, replicas...)"
    ]
    missing = skyhop("serve", "status", "plain", env=cli_env)
    assert missing.returncode == 1 and "service 'plain' not found" in missing.stderr


def test_serve_update_takes_a_mode_and_says_what_each_does(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from skyhop.cli.app import app

    shown = CliRunner().invoke(app, ["serve", "update", "--help"], terminal_width=200)
    assert shown.exit_code == 0
    assert "--mode" in shown.output and "blue_green:" in shown.output and "rolls back" in shown.output
    spec = tmp_path / "svc.yaml"
    spec.write_text("run: serve\nservice:\n  readiness_probe: /\n  replicas: 1\nresources:\n  infra: local\n")
    refused = CliRunner().invoke(app, ["serve", "update", "svc", str(spec), "--mode", "sideways"])
    assert refused.exit_code == 2
    assert refused.output.strip().splitlines() == ["Error: --mode 'sideways': one of rolling, blue_green"]


def test_serve_status_says_an_update_was_rolled_back() -> None:
    from skyhop.cli.serving import status_notes
    from skyhop.contract.serve import ServiceState, ServiceUpdate, UpdateMode

    state = ServiceState(
        name="svc", user="u", version=1, update_message="the update to version 2 was rolled back"
    )
    assert status_notes(state) == ["the update to version 2 was rolled back"]
    state.update = ServiceUpdate(version=3, previous=1, mode=UpdateMode.BLUE_GREEN)
    assert status_notes(state)[-1] == "updating to version 3 (blue_green) from version 1"


def test_serve_logs_takes_the_replica_id_as_an_argument() -> None:
    from typer.testing import CliRunner

    from skyhop.cli.app import app

    shown = CliRunner().invoke(app, ["serve", "logs", "--help"], terminal_width=200)
    assert shown.exit_code == 0
    assert "[REPLICA_ID]" in shown.output and "--load-balancer" in shown.output
    assert "--replica " not in shown.output  # the older spelling still works, unlisted
    for args in (["svc", "abc"], ["svc", "0"], ["svc", "--replica", "-1"]):
        refused = CliRunner().invoke(app, ["serve", "logs", *args])
        assert refused.exit_code == 2, refused.output
        assert len(refused.output.strip().splitlines()) == 1 and "a replica's ID" in refused.output
    both = CliRunner().invoke(app, ["serve", "logs", "svc", "2", "--load-balancer"])
    assert both.exit_code == 2
    assert both.output.strip() == "Error: give a REPLICA_ID or --load-balancer, not both"
