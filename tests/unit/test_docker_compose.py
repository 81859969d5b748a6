"""docker-compose.yml describes a deployment the code really supports (no Docker engine runs here)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from skyhop.cli.config import load_config

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def compose() -> dict:  # type: ignore[type-arg]
    data = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    assert isinstance(data, dict)
    return data


def test_services_and_ports(compose: dict) -> None:  # type: ignore[type-arg]
    services = compose["services"]
    assert set(services) == {"postgresql", "temporal", "temporal-ui", "skyhop-worker"}
    assert services["temporal"]["environment"]["DB"] == "postgres12"
    assert services["temporal"]["environment"]["POSTGRES_SEEDS"] == "postgresql"
    assert "127.0.0.1:7233:7233" in services["temporal"]["ports"]
    assert services["temporal-ui"]["environment"]["TEMPORAL_ADDRESS"] == "temporal:7233"
    assert "127.0.0.1:8080:8080" in services["temporal-ui"]["ports"]


def test_nothing_is_published_beyond_this_host(compose: dict) -> None:  # type: ignore[type-arg]
    """Temporal and the UI have no TLS or auth in this file: loopback only (issue 9, item 1)."""
    for name, service in compose["services"].items():
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port} on every interface"


def test_workers_get_the_payload_key_as_a_secret(
    compose: dict,  # type: ignore[type-arg]
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    worker = compose["services"]["skyhop-worker"]
    assert worker["secrets"] == ["skyhop_key"]
    assert "skyhop_key" in compose["secrets"]
    assert "SKYHOP_KEY" not in worker["environment"]  # a key in the environment shows in `docker inspect`
    monkeypatch.setenv("SKYHOP_KEY_FILE", worker["environment"]["SKYHOP_KEY_FILE"])
    assert load_config().key_file == "/run/secrets/skyhop_key"


def test_worker_runs_the_skyhop_worker_against_that_server(
    compose: dict,  # type: ignore[type-arg]
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    worker = compose["services"]["skyhop-worker"]
    assert worker["command"] == ["skyhop", "worker"]
    assert worker["build"] == "."
    assert (REPO / "Dockerfile").exists()
    assert worker["deploy"]["replicas"] >= 2
    # The variables the compose file sets are the ones skyhop reads, with the meaning intended.
    for name, value in worker["environment"].items():
        monkeypatch.setenv(name, str(value))
    config = load_config()
    assert config.address == "temporal:7233"
    assert config.namespace == "default"
    assert not config.embedded


def test_worker_command_exists_in_the_cli() -> None:
    from typer.testing import CliRunner

    from skyhop.cli.app import app

    result = CliRunner().invoke(app, ["worker", "--help"])
    assert result.exit_code == 0
    assert "--address" in result.output
