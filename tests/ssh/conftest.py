"""Real sshd hosts for the SSH provider's tests, and a pool of them registered with ``skyhop ssh up``.

Session hosts (never killed by a test): node1 and node2 are alike; node3 (namespace mode) has
two fake A100-80GB GPUs and no rsync. Tests that kill a node start their own hosts. Pools live
in the session's Temporal (``SSHPoolsWorkflow``), which the session worker runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from skyhop.providers.ssh.deployment import fetch_inventory
from skyhop.providers.ssh.inventory import Inventory
from tests.conftest import cli_environment, run, skyhop
from tests.helpers import DevServer, WorkerProcess
from tests.ssh.hosts import SSHHost, SSHHosts

A100 = "NVIDIA A100-SXM4-80GB"


def pools_yaml(path: Path, pools: dict[str, list[SSHHost]], key: Path) -> Path:
    """Write a SkyPilot-style ssh_node_pools.yaml for these hosts."""
    lines = []
    for name, hosts in pools.items():
        lines += [f"{name}:", "  user: root", f"  identity_file: {key}", "  hosts:"]
        lines += [f"    - {{ip: {h.address}, port: {h.port}}}" for h in hosts]
    path.write_text("\n".join(lines) + "\n")
    return path


def ssh_up(path: Path, env: dict[str, str]) -> None:
    out = skyhop("ssh", "up", str(path), env=env)
    assert out.returncode == 0, out.stderr


@pytest.fixture(scope="session")
def ssh_hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SSHHosts]:
    hosts = SSHHosts(tmp_path_factory.mktemp("sshd"), 3, gpus={3: [A100, A100]}, without_rsync=frozenset({3}))
    with hosts.running():
        yield hosts


@pytest.fixture(scope="session")
def registered_lab(
    ssh_hosts: SSHHosts,
    temporal_server: DevServer,
    worker: WorkerProcess,
    tmp_path_factory: pytest.TempPathFactory,
) -> str:
    path = pools_yaml(
        tmp_path_factory.mktemp("pools") / "pools.yaml", {"lab": ssh_hosts.hosts}, ssh_hosts.key
    )
    ssh_up(path, cli_environment(temporal_server.address))
    return "lab"


@pytest.fixture
def lab_pool(registered_lab: str, live_worker: WorkerProcess, pools_in_temporal: None) -> str:
    """Pool ``lab`` (node1, node2, node3) registered in the session's Temporal."""
    return registered_lab


@pytest.fixture
def pools_in_temporal(
    cli_env: dict[str, str], live_worker: WorkerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Provider calls a test makes itself (outside a worker) reach the session's pools, as the CLI's do."""
    for name in ("SKYHOP_TEMPORAL_ADDRESS", "SKYHOP_KEY_FILE"):
        monkeypatch.setenv(name, cli_env[name])


def inventory() -> Inventory:
    """The session's pools as the workflow holds them now."""
    return run(fetch_inventory())


@pytest.fixture
def doomed_hosts(tmp_path: Path) -> Iterator[SSHHosts]:
    """Two hosts of a test's own, for killing or unplugging."""
    (tmp_path / "sshd").mkdir()
    with SSHHosts(tmp_path / "sshd", 2).running() as hosts:
        yield hosts
