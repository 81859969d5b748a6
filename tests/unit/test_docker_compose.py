"""docker-compose.yml describes a deployment the code really supports (no Docker engine runs here).

Names are checked against what skyhop does with them, not against a list: a variable a skyhop
service sets must change the settings skyhop reads, and README's CLI settings must reach the same
Temporal and store as the workers.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml

from skyhop.cli.config import load_config
from skyhop.providers.home import skyhop_home
from skyhop.storage.content import load_store_config
from skyhop.storage.errors import StorageError

REPO = Path(__file__).resolve().parents[2]

SHELL = {"SKYHOP_STORE_ACCESS_KEY_ID": "store-user", "SKYHOP_STORE_SECRET_ACCESS_KEY": "store-secret-0123"}
"""What the operator exports before ``docker compose up`` (the file's header says so)."""


@pytest.fixture(scope="module")
def compose() -> dict:  # type: ignore[type-arg]
    data = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    assert isinstance(data, dict)
    return data


def interpolated(value: object) -> str:
    """``value`` as compose sees it with ``SHELL`` exported (``${X}``, ``${X:?msg}``, ``${X:-default}``)."""

    def one(match: re.Match[str]) -> str:
        name, how, rest = match.group(1), match.group(2), match.group(3)
        if name in SHELL:
            return SHELL[name]
        assert how == ":-", f"${{{name}}} has no default and the header does not say to export it"
        return rest

    return re.sub(r"\$\{([A-Z_]+)(?:(:[?-])([^}]*))?\}", one, str(value))


def environment(service: dict[str, Any]) -> dict[str, str]:
    return {name: interpolated(value) for name, value in (service.get("environment") or {}).items()}


def skyhop_services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The services that run skyhop (the image this repository builds)."""
    return {name: s for name, s in compose["services"].items() if s.get("build") == "."}


def effective_settings() -> tuple[object, ...]:
    """Everything skyhop derives from its environment at start: Temporal, keyring, store, home.

    A setting refused as incomplete (one store key without the other) counts as read: it is named.
    """
    try:
        store: object = load_store_config()
    except StorageError as exc:
        store = str(exc)
    return load_config(), store, skyhop_home()


def published(service: dict[str, Any], container_port: int) -> str:
    """``host:port`` where ``container_port`` is published on this host."""
    for port in service.get("ports", []):
        host, host_port, inner = str(port).rsplit(":", 2)
        if int(inner) == container_port:
            return f"{host}:{host_port}"
    raise AssertionError(f"port {container_port} is not published")


def readme_cli_exports() -> dict[str, str]:
    """The ``export NAME=VALUE`` lines README's "Configuration" section gives a CLI of this deployment."""
    text = (REPO / "README.md").read_text()
    section = text[text.index("## Configuration") :]
    section = section[: section.index("\n## ", 1)]
    blocks = [
        b for b in re.findall(r"```sh\n(.*?)```", section, re.DOTALL) if "SKYHOP_TEMPORAL_ADDRESS=" in b
    ]
    assert len(blocks) == 1, "README's Configuration section has no one shell block that sets up a CLI"
    return dict(re.findall(r"^export (SKYHOP_[A-Z_]+)=(\S+)", blocks[0], re.MULTILINE))


def assert_each_is_read(names: dict[str, str], monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    """With all of ``names`` set, another value for any one of them changes what skyhop reads.

    (Another value, not none: a value that equals the default is read all the same.)
    """
    for name, value in names.items():
        monkeypatch.setenv(name, value)
    everything = effective_settings()
    for name, value in names.items():
        with monkeypatch.context() as other:
            other.setenv(name, f"{value}-other")
            assert effective_settings() != everything, f"{where} sets {name}, which skyhop does not read"


def test_services_and_ports(compose: dict) -> None:  # type: ignore[type-arg]
    services = compose["services"]
    assert set(services) == {"postgresql", "temporal", "temporal-ui", "minio", "store-setup", "skyhop-worker"}
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


def test_every_variable_a_skyhop_service_sets_is_one_skyhop_reads(
    compose: dict,  # type: ignore[type-arg]
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    services = skyhop_services(compose)
    assert services, "no service runs the image built from this repository"
    for name, service in services.items():
        with monkeypatch.context() as env:
            assert_each_is_read(environment(service), env, f"docker-compose.yml's {name}")


def test_the_workers_use_the_bucket_compose_creates_with_the_stores_own_keys(
    compose: dict,  # type: ignore[type-arg]
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    services = compose["services"]
    worker, minio, setup = environment(services["skyhop-worker"]), services["minio"], services["store-setup"]
    for name, value in worker.items():
        monkeypatch.setenv(name, value)
    store = load_store_config()
    url, endpoint = urlparse(store.url), urlparse(str(store.endpoint_url))
    assert url.scheme == "s3" and setup["command"] == ["mb", "--ignore-existing", f"store/{url.netloc}"]
    # The workers reach MinIO by its service name and the port it serves on, with its own root keys.
    assert endpoint.hostname == "minio" and minio["command"][-2:] == ["--address", f":{endpoint.port}"]
    assert store.credentials is not None
    minio_env = environment(minio)
    assert (store.credentials.access_key_id, store.credentials.secret_access_key) == (
        minio_env["MINIO_ROOT_USER"], minio_env["MINIO_ROOT_PASSWORD"]
    )  # fmt: skip
    mc_host = urlparse(environment(setup)["MC_HOST_store"])
    assert (mc_host.username, mc_host.password) == (
        minio_env["MINIO_ROOT_USER"],
        minio_env["MINIO_ROOT_PASSWORD"],
    )
    assert f"{mc_host.hostname}:{mc_host.port}" == f"minio:{endpoint.port}"
    assert setup["depends_on"]["minio"]["condition"] == "service_healthy"
    assert (
        services["skyhop-worker"]["depends_on"]["store-setup"]["condition"]
        == "service_completed_successfully"
    )
    # Store keys are the store's alone: boto3's chain (the aws provider's keys, ~/.aws) is untouched.
    assert not any(name.startswith("AWS_") for name in worker)


def test_readme_points_a_cli_at_the_same_temporal_and_store(
    compose: dict,  # type: ignore[type-arg]
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    services = compose["services"]
    cli = {name: interpolated(value) for name, value in readme_cli_exports().items()}
    assert_each_is_read(cli, monkeypatch, "README's Configuration section")
    config, store = load_config(), load_store_config()
    assert config.address == published(services["temporal"], 7233)
    worker = environment(services["skyhop-worker"])
    assert store.url == worker["SKYHOP_STORE_URL"]  # one store; each machine has its own way to it
    endpoint = urlparse(str(store.endpoint_url))
    minio_port = int(services["minio"]["command"][-1].lstrip(":"))
    assert f"{endpoint.hostname}:{endpoint.port}" == published(services["minio"], minio_port)
    assert store.credentials is not None  # the store's own keys, as the workers have them
