"""Stopping the fake leaves nothing: no pod process (even a detached one), namespace, veth or bridge."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.fakes.kubernetes import FakeKubernetes, NodeSpec
from tests.fakes.kubernetes.fixture import core_api, pod_manifest
from tests.fakes.kubernetes.sandbox import MARKER
from tests.helpers import wait_for
from tests.netns import can_netns


def _marked(uid: str) -> list[int]:
    """Processes carrying pod ``uid``'s marker: only this test's pod, whatever other tests run at once."""
    found = []
    needle = f"{MARKER}={uid}".encode()
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if needle in environ.read_bytes().split(b"\0"):
                found.append(int(environ.parent.name))
        except OSError:
            continue
    return found


@pytest.mark.parametrize("loopback", [False, True], ids=["netns", "loopback"])
def test_stop_kills_every_pod_process_and_removes_the_network(tmp_path: Path, loopback: bool) -> None:
    if not loopback and not can_netns():
        pytest.skip("network namespaces need root")
    fake = FakeKubernetes(tmp_path, [NodeSpec("n1")], loopback=loopback)
    with fake:
        api = core_api(fake)
        daemon = ["sh", "-c", "setsid sh -c 'sleep 600' </dev/null >/dev/null 2>&1 & exec sleep 600"]
        api.create_namespaced_pod("default", pod_manifest("leaky", daemon))
        pod = fake.wait_pod("leaky", "Running")
        assert (pod["status"]["podIP"] == "127.0.0.1") == loopback
        uid = pod["metadata"]["uid"]
        wait_for(lambda: len(_marked(uid)) >= 2, 10, "the pod's processes")
        tag = fake.network.bridge.tag if fake.network and fake.network.bridge else None
    assert _marked(uid) == []
    if tag is not None:
        links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
        spaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert tag not in links and tag not in spaces
