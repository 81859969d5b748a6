"""``skyhop ssh up|status|down`` as a user runs them, against real sshd hosts."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from skyhop.providers.registry import read_checks, write_checks
from skyhop.providers.ssh.inventory import identity_digest
from tests.conftest import run, skyhop
from tests.ssh.conftest import inventory, pools_yaml
from tests.ssh.hosts import SSHHosts


def _env() -> dict[str, str]:
    return dict(os.environ)


def test_ssh_up_probes_every_host_and_pins_its_key(ssh_hosts: SSHHosts, lab_pool: str) -> None:
    registered = inventory()
    hosts = {h.spec.address + f":{h.spec.port}": h for h in registered.pools[lab_pool]}
    assert len(hosts) == 3
    key = ssh_hosts.key.read_text()
    assert registered.identities[identity_digest(key)] == key  # workers elsewhere log in with it
    for test_host in ssh_hosts.hosts:
        host = hosts[f"{test_host.address}:{test_host.port}"]
        assert host.facts is not None and host.error is None
        assert host.facts.cpus == os.cpu_count() and host.facts.memory_gib > 0
        assert host.host_key is not None and host.known_hosts_line in registered.known_hosts()
        assert host.identity == identity_digest(key)
        assert host.facts.home == "/root"
    if not ssh_hosts.loopback:
        node1, node3 = (
            hosts[f"{h.address}:{h.port}"].facts for h in (ssh_hosts.hosts[0], ssh_hosts.hosts[2])
        )
        assert node1 is not None and node3 is not None
        assert (node1.hostname, node1.rsync, node1.accelerators) == ("node1", True, {})
        assert (node3.hostname, node3.rsync, node3.accelerators) == ("node3", False, {"A100-80GB": 2.0})


def test_ssh_status_shows_reachability_size_and_holder(ssh_hosts: SSHHosts, lab_pool: str) -> None:
    from skyhop.providers.base import Offering, ProvisionRequest
    from skyhop.providers.ssh import SSHProvider

    provider = SSHProvider()
    run(provider.load())
    offering = next(o for o in provider.offerings() if o.region == lab_pool and not o.accelerators)
    handle = run(
        provider.launch(ProvisionRequest(cluster_name="status-held", offering=offering, num_nodes=1))
    )
    try:
        out = skyhop("ssh", "status", env=_env())
        assert out.returncode == 0, out.stderr
        first = ssh_hosts.hosts[0]
        row = next(line for line in out.stdout.splitlines() if f"{first.address}:{first.port}" in line)
        assert row.split()[:4] == ["lab", f"{first.address}:{first.port}", "root", "reachable"]
        assert "status-held (rank 0)" in row
        rows = json.loads(skyhop("ssh", "status", "--json", env=_env()).stdout)["items"]
        assert {r["host"] for r in rows if r["reachable"]} >= {
            f"{h.address}:{h.port}" for h in ssh_hosts.hosts
        }
        # A held host's pool cannot be removed.
        refused = skyhop("ssh", "down", lab_pool, env=_env())
        assert refused.returncode == 1
        assert "held by cluster 'status-held'" in refused.stderr and "Traceback" not in refused.stderr
        assert lab_pool in inventory().pools
    finally:
        run(provider.terminate(handle))
    assert isinstance(offering, Offering)


def test_an_unreachable_host_is_reported_and_the_others_registered(
    ssh_hosts: SSHHosts, doomed_hosts: SSHHosts, pools_in_temporal: None, tmp_path: Path
) -> None:
    doomed_hosts.hosts[1].kill()
    path = pools_yaml(tmp_path / "pools.yaml", {"flaky": doomed_hosts.hosts}, doomed_hosts.key)
    out = skyhop("ssh", "up", str(path), env=_env())
    assert out.returncode == 1
    assert "1 of 2 host(s) did not answer" in out.stderr and "Traceback" not in out.stderr
    assert "UNREACHABLE" in out.stdout and "Pool flaky: 1 of 2 host(s) ready." in out.stderr
    flaky = inventory().pools["flaky"]
    assert flaky[0].facts is not None and flaky[1].facts is None and flaky[1].error
    down = skyhop("ssh", "down", "flaky", env=_env())
    assert down.returncode == 0 and "flaky" not in inventory().pools


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("lab: [1, 2]", "lab: expected a mapping with 'hosts', got list"),
        ("lab:\n  user: root\n  hosts: []", "lab.hosts: expected a non-empty list of hosts"),
        (
            "lab:\n  user: root\n  hosts: [{ip: h, port: 70000}]",
            "lab.hosts[0].port: expected an integer from 1 to 65535",
        ),
        ("lab:\n  hosts: [h1]", "lab.hosts[0]: no 'user' for this host"),
        ("lab:\n  user: root\n  password: x\n  hosts: [h1]", "lab.password: not supported"),
        ("lab:\n  user: root\n  hots: [h1]", "lab: unknown field 'hots'"),
        (
            "lab:\n  user: root\n  identity_file: /nonexistent/key\n  hosts: [h1]",
            "/nonexistent/key does not exist",
        ),
        ("lab:\n  user: root\n  hosts: [h1, h1]", "lab.hosts[1]: h1:22 is listed twice"),
        ("'bad name':\n  user: root\n  hosts: [h1]", "pool name 'bad name' is invalid"),
        ("lab: {", "not valid YAML"),
    ],
)
def test_bad_pools_files_fail_with_one_line_and_register_nothing(
    pools_in_temporal: None, tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "pools.yaml"
    path.write_text(content)
    before = inventory()
    out = skyhop("ssh", "up", str(path), env=_env())
    assert out.returncode == 2
    assert message in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert inventory() == before


def test_ssh_up_reads_the_default_pools_file(
    ssh_hosts: SSHHosts, cli_env: dict[str, str], tmp_path: Path
) -> None:
    home = tmp_path / "home"
    env = {**cli_env, "HOME": str(home), "SKYHOP_HOME": str(home / ".skyhop")}
    missing = skyhop("ssh", "up", env=env)
    assert missing.returncode == 2 and "ssh_node_pools.yaml" in missing.stderr
    (home / ".skyhop").mkdir(parents=True)
    pools_yaml(home / ".skyhop" / "ssh_node_pools.yaml", {"solo": ssh_hosts.hosts[:1]}, ssh_hosts.key)
    out = skyhop("ssh", "up", env=env)
    assert out.returncode == 0, out.stderr
    assert "Pool solo: 1 of 1 host(s) ready." in out.stderr
    unknown = skyhop("ssh", "down", "nope", env=env)
    assert unknown.returncode == 1 and "no ssh pool named 'nope'; registered pools: " in unknown.stderr
    assert "solo" in unknown.stderr.strip().split("registered pools: ")[1].split(", ")
    assert skyhop("ssh", "down", "solo", env=env).returncode == 0


def test_a_dryrun_pinned_to_a_pool_plans_on_its_hosts(
    lab_pool: str, cli_env: dict[str, str], tmp_path: Path
) -> None:
    """The CLI plans in-process: the pools it reads are the deployment's, in Temporal."""
    task = tmp_path / "task.yaml"
    task.write_text("run: echo hi\n")
    for _ in range(3):  # the Temporal client's threads must not abort the exit (SIGABRT)
        out = skyhop("launch", "--dryrun", "--infra", f"ssh/{lab_pool}", str(task), env=cli_env)
        assert out.returncode == 0, out.stderr
        chosen = next(line for line in out.stdout.splitlines() if line.endswith("✔")).split()
        assert chosen[0] == "ssh" and lab_pool in chosen


def test_check_finds_the_deployments_pools(lab_pool: str, cli_env: dict[str, str]) -> None:
    before = read_checks()  # check's verdicts are the deployment's: put back for the session's other tests
    try:
        done = skyhop("check", "--json", env=cli_env)
        assert done.returncode == 0, done.stderr
        ssh = next(item for item in json.loads(done.stdout)["items"] if item["provider"] == "ssh")
        assert ssh["enabled"] and lab_pool in ssh["reason"].removeprefix("pools: ").split(", ")
    finally:
        write_checks(before)


def test_ssh_status_with_no_temporal_running_starts_none(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {**_env(), "HOME": str(home), "SKYHOP_HOME": str(home / ".skyhop")}
    out = skyhop("ssh", "status", env=env)
    assert out.returncode == 0, out.stderr
    assert "No SSH pools. Register some with: skyhop ssh up pools.yaml" in out.stderr
    assert not (home / ".skyhop" / "server").exists()  # the embedded server was not started
