"""Node access is a typed union, and node handles written before it existed still load."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from skyhop.providers.base import ClusterHandle, LocalAccess, NodeHandle, SshAccess

_HISTORIES = Path(__file__).parents[1] / "cluster" / "histories"


def test_an_old_cloud_node_becomes_ssh_access_and_is_written_in_the_new_shape() -> None:
    old = {
        "rank": 1,
        "instance_id": "i-1",
        "ip": "10.0.0.2",
        "runtime_dir": "/home/ubuntu/.skyhop-node/web-1",
        "public_ip": "3.3.3.3",
        "ssh_user": "ubuntu",
        "ssh_port": 2222,
    }
    node = NodeHandle.model_validate(old)
    assert node.access == SshAccess(user="ubuntu", port=2222, public_ip="3.3.3.3")
    written = node.model_dump(mode="json")
    assert "ssh_user" not in written and written["access"]["kind"] == "ssh"
    assert NodeHandle.model_validate(written) == node


def test_an_old_folder_node_is_local_and_an_old_pool_host_is_ssh() -> None:
    folder = {
        "rank": 0,
        "instance_id": "c-0",
        "ip": "127.0.0.1",
        "runtime_dir": "/h/.skyhop/clusters/c/node-0",
    }
    assert NodeHandle.model_validate({**folder, "ssh_user": None, "ssh_port": 22}).access == LocalAccess()
    pool = {**folder, "runtime_dir": "/root/.skyhop-node/c-0", "ssh_user": None, "public_ip": None}
    assert NodeHandle.model_validate(pool).access == SshAccess(user=None)


def test_recorded_histories_hold_old_node_handles_that_load() -> None:
    """The replay test's histories were recorded with flat SSH fields: they must still validate."""
    found = 0
    for path in sorted(_HISTORIES.glob("*.json")):
        for event in json.loads(path.read_text())["events"]:
            for attributes in event.values():
                if not isinstance(attributes, dict):
                    continue
                for payload in attributes.get("input", {}).get("payloads", []):
                    data = json.loads(base64.b64decode(payload["data"]))
                    handle = data.get("handle") if isinstance(data, dict) else None
                    if (
                        isinstance(handle, dict)
                        and handle.get("nodes")
                        and "access" not in handle["nodes"][0]
                    ):
                        assert ClusterHandle.model_validate(handle).head.access == LocalAccess()
                        found += 1
    assert found, "no recorded history holds an old node handle any more"
