"""The node SSH key is one per deployment: workers with their own homes, one store, one payload key."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from skyhop.contract.codec import Keyring
from skyhop.providers import keys
from skyhop.providers.aws import AWSProvider
from skyhop.providers.aws.provider import SSH_USER, key_pair_name
from skyhop.providers.errors import ProviderUnavailableError
from skyhop.storage.content import open_store
from skyhop.storage.secrets import secret_key
from tests.conftest import run
from tests.netns import can_netns
from tests.providers.aws_support import InstanceHosts, aws_instances, reset
from tests.providers.test_aws import _request
from tests.ssh.hosts import SSHHosts

WORKER = """
import pathlib, sys, time
from skyhop.cli.config import load_config
from skyhop.cli.payload_key import load_keyring
from skyhop.providers.aws.provider import key_pair_name
from skyhop.providers.keys import key_paths, public_key, use_payload_keyring

use_payload_keyring(load_keyring(load_config()))
go = pathlib.Path(sys.argv[1])
while not go.exists():  # every process starts at once: they race to create the key
    time.sleep(0.01)
private, _ = key_paths()
print(public_key(), key_pair_name(), oct(private.stat().st_mode & 0o777), sep="|")
"""

KEY = base64.b64encode(b"k" * 32).decode()


@pytest.fixture
def deployment_keyring() -> Iterator[Keyring]:
    """This test's payload key in this process, the session's again afterwards."""
    before = keys._keyring
    keyring = Keyring((b"k" * 32,))
    keys.use_payload_keyring(keyring)
    yield keyring
    keys._keyring = before


def _store_url(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if kind == "folder":
        return (tmp_path / "store").as_uri()
    request.getfixturevalue("faults")  # an emptied moto
    boto3.session.Session().client("s3", region_name="us-east-1").create_bucket(Bucket="deploy")
    return "s3://deploy/skyhop"


@pytest.mark.parametrize("kind", ["folder", "s3"])
def test_workers_racing_on_one_store_end_with_one_key(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = _store_url(kind, tmp_path, request)
    go = tmp_path / "go"
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(go)],
            env={
                **os.environ,
                "SKYHOP_HOME": str(tmp_path / f"w{n}"),
                "SKYHOP_KEY": KEY,
                "SKYHOP_STORE_URL": url,
            },
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for n in range(4)
    ]
    go.touch()
    outputs = [worker.communicate(timeout=120) for worker in workers]
    assert [worker.returncode for worker in workers] == [0] * 4, outputs
    lines = {out.strip() for out, _ in outputs}
    assert len(lines) == 1, lines
    public, pair, mode = lines.pop().split("|")
    assert public.startswith("ssh-ed25519 ") and pair.startswith("skyhop-") and mode == "0o600"
    sealed = open_store(url, os.environ.get("SKYHOP_STORE_ENDPOINT_URL")).get_bytes(
        secret_key(keys.NODE_KEY_SECRET)
    )
    assert b"PRIVATE KEY" not in sealed and public.split()[1].encode() not in sealed


def test_a_store_sealed_with_another_payload_key_is_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, deployment_keyring: Keyring
) -> None:
    monkeypatch.setenv("SKYHOP_STORE_URL", (tmp_path / "store").as_uri())
    monkeypatch.setenv("SKYHOP_HOME", str(tmp_path / "a"))
    keys.key_paths()
    monkeypatch.setenv("SKYHOP_HOME", str(tmp_path / "b"))
    keys.use_payload_keyring(Keyring((b"x" * 32,)))
    with pytest.raises(ProviderUnavailableError, match="must use the same SKYHOP_KEY") as caught:
        keys.key_paths()
    assert "\n" not in str(caught.value) and not caught.value.retry_can_fix
    assert not (tmp_path / "b" / "keys" / "skyhop").exists()


def test_a_machine_key_from_before_becomes_the_deployment_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, deployment_keyring: Keyring
) -> None:
    """Nodes that a machine made with its own key stay reachable once keys are shared."""
    old = Ed25519PrivateKey.generate()
    folder = tmp_path / "a" / "keys"
    folder.mkdir(parents=True)
    (folder / "skyhop").write_bytes(
        old.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
        )
    )
    line = old.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    monkeypatch.setenv("SKYHOP_STORE_URL", (tmp_path / "store").as_uri())
    for home in ("a", "b"):
        monkeypatch.setenv("SKYHOP_HOME", str(tmp_path / home))
        assert keys.public_key() == line.decode() + " skyhop"


def test_a_node_launched_from_one_worker_home_lets_another_worker_in(
    moto: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, deployment_keyring: Keyring
) -> None:
    """Worker A launches; the node (an sshd host) trusts the key pair AWS holds, as cloud-init would
    make it; worker B, with a home of its own, names the same key pair and logs in with its copy."""
    if not can_netns():
        pytest.skip("EC2 nodes are reached on port 22 of their own address: this needs network namespaces")
    reset(moto)
    monkeypatch.setenv("SKYHOP_STORE_URL", (tmp_path / "store").as_uri())
    (tmp_path / "sshd").mkdir()
    with (
        SSHHosts(tmp_path / "sshd", 1, login=SSH_USER).running() as hosts,
        InstanceHosts(hosts.hosts).install(),
    ):
        monkeypatch.setenv("SKYHOP_HOME", str(tmp_path / "worker-a"))
        provider = AWSProvider()
        handle = run(provider.launch(_request(nodes=1)))
        ec2 = boto3.session.Session().client("ec2", region_name="us-east-1")
        [pair] = ec2.describe_key_pairs(IncludePublicKey=True)["KeyPairs"]
        hosts.authorise(pair["PublicKey"])

        monkeypatch.setenv("SKYHOP_HOME", str(tmp_path / "worker-b"))
        [instance] = aws_instances(cluster="web")
        assert instance["KeyName"] == pair["KeyName"] == key_pair_name()
        runtime = provider.runtime(handle.nodes[0])
        run(runtime.prepare())  # over SSH, with worker B's copy of the key
        assert run(runtime.job_state("never-ran")) is None
        assert (tmp_path / "worker-b" / "keys" / "skyhop").read_bytes() == (
            tmp_path / "worker-a" / "keys" / "skyhop"
        ).read_bytes()
        run(provider.terminate(handle))
