"""No web page can start a workflow: a ``text/plain`` POST (a "simple" cross-site request, which a
browser sends without asking) to every port the dev server opened starts nothing (issue 9, item 1)."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest
from temporalio.service import RPCError, RPCStatusCode

from skyhop.providers.home import skyhop_home
from tests.conftest import run
from tests.helpers import SKYHOP_CLI, DevServer, free_port, wait_for
from tests.integration.support import client_for

pytestmark = pytest.mark.integration


def listening_ports(pid: int) -> dict[int, str]:
    """TCP ports the process listens on, with the address each is bound to (from /proc/net/tcp*)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except FileNotFoundError:  # closed while we looked (a starting process)
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                address, port = fields[1].split(":")
                ports[int(port, 16)] = address
    return ports


def post_start(port: int, workflow_id: str) -> tuple[int, bytes]:
    """What a hostile page's ``fetch(url, {method: "POST", body})`` sends: text/plain, Host as in the URL."""
    body = {
        "workflowId": workflow_id,
        "workflowType": {"name": "LaunchWorkflow"},
        "taskQueue": {"name": "skyhop-workflows"},
        "input": {"payloads": [{"metadata": {"encoding": "anNvbi9wbGFpbg=="}, "data": "e30="}]},
    }
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request(
            "POST",
            f"/api/v1/namespaces/default/workflows/{workflow_id}",
            body=json.dumps(body),
            headers={"Content-Type": "text/plain;charset=UTF-8", "Origin": "http://evil.example"},
        )
        response = connection.getresponse()
        return response.status, response.read()
    except (OSError, http.client.HTTPException) as exc:  # a gRPC port speaks HTTP/2 only
        return 0, str(exc).encode()
    finally:
        connection.close()


def test_a_text_plain_post_to_any_dev_server_port_starts_nothing(temporal_server: DevServer) -> None:
    assert temporal_server.proc is not None
    pid = temporal_server.proc.pid
    chosen = {
        temporal_server.port,
        temporal_server.ui_port,
        temporal_server.http_port,
        temporal_server.metrics_port,
    }
    # The Web UI and HTTP API may open a little after gRPC does.
    wait_for(lambda: chosen <= set(listening_ports(pid)), 60, f"the server to listen on {chosen}")
    ports = listening_ports(pid)
    assert set(ports.values()) == {"0100007F"}, f"every port on 127.0.0.1: {ports}"

    ids = {port: f"browser-{port}-{uuid.uuid4().hex[:6]}" for port in ports}
    answers = {port: post_start(port, workflow_id) for port, workflow_id in ids.items()}
    assert answers[temporal_server.http_port][0] == 403, answers[temporal_server.http_port]
    assert answers[temporal_server.ui_port][0] == 400, answers[temporal_server.ui_port]  # no CSRF token

    async def started() -> list[str]:
        client = await client_for(temporal_server.address)
        found = []
        for workflow_id in ids.values():
            try:
                await client.get_workflow_handle(workflow_id).describe()
                found.append(workflow_id)
            except RPCError as exc:
                assert exc.status == RPCStatusCode.NOT_FOUND
        return found

    assert run(started()) == [], answers


def test_a_text_plain_post_to_the_codec_server_encodes_or_decodes_nothing(cli_env: dict[str, str]) -> None:
    """``skyhop server codec`` (the code the embedded worker serves too) is one more port skyhop opens."""
    port = free_port()
    codec = subprocess.Popen(
        [SKYHOP_CLI, "server", "codec", "--port", str(port)],
        env=cli_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_for(lambda: port in listening_ports(codec.pid), 60, "the codec server to listen")
        assert listening_ports(codec.pid) == {port: "0100007F"}
        token = (skyhop_home() / "codec-token").read_text().strip()
        for operation in ("encode", "decode"):
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            connection.request(
                "POST",
                f"/{token}/{operation}",
                body=json.dumps({"payloads": [{"metadata": {}, "data": "e30="}]}),
                headers={"Content-Type": "text/plain;charset=UTF-8"},
            )
            response = connection.getresponse()
            assert (response.status, b"payloads" in response.read()) == (415, False)
            connection.close()
    finally:
        codec.terminate()
        codec.wait(10)
