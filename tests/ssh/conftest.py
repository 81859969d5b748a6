"""Real sshd hosts for the SSH provider's tests, and a pool of them registered with ``skyhop ssh up``.

Session hosts (never killed by a test): node1 and node2 are alike; node3 (namespace mode) has
two fake A100-80GB GPUs and no rsync. Tests that kill a node start their own hosts.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import skyhop
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


def ssh_up(path: Path) -> None:
    out = skyhop("ssh", "up", str(path), env=dict(os.environ))
    assert out.returncode == 0, out.stderr


@pytest.fixture(scope="session")
def ssh_hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SSHHosts]:
    hosts = SSHHosts(tmp_path_factory.mktemp("sshd"), 3, gpus={3: [A100, A100]}, without_rsync=frozenset({3}))
    with hosts.running():
        yield hosts


@pytest.fixture(scope="session")
def lab_pool(ssh_hosts: SSHHosts, tmp_path_factory: pytest.TempPathFactory) -> str:
    """Pool ``lab`` (node1, node2, node3) registered in the session's SKYHOP_HOME."""
    path = pools_yaml(
        tmp_path_factory.mktemp("pools") / "pools.yaml", {"lab": ssh_hosts.hosts}, ssh_hosts.key
    )
    ssh_up(path)
    return "lab"


@pytest.fixture
def doomed_hosts(tmp_path: Path) -> Iterator[SSHHosts]:
    """Two hosts of a test's own, for killing or unplugging."""
    (tmp_path / "sshd").mkdir()
    with SSHHosts(tmp_path / "sshd", 2).running() as hosts:
        yield hosts
