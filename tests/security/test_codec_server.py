"""The codec server over HTTP: Temporal's remote codec protocol, for the token holder and the Web UI only."""

from __future__ import annotations

import asyncio
import base64
import http.client
import json
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from threading import Thread

import pytest
from temporalio.api.common.v1 import Payload

from skyhop.cli.codec_server import CodecServer, serve_codec
from skyhop.cli.config import TemporalConfig
from skyhop.cli.embedded import temporal_binary
from skyhop.cli.payload_key import load_keyring
from skyhop.contract.clusters import LaunchRequest
from skyhop.contract.converter import skyhop_data_converter
from skyhop.spec import Task
from tests.conftest import run
from tests.helpers import DevServer
from tests.integration.support import client_for

UI = "http://127.0.0.1:18233"
TOKEN = "codec-test-token"
SECRET = "hf_codec_server_value"
REQUEST = LaunchRequest(cluster_name="dev", task=Task(run="true", secrets={"HF_TOKEN": SECRET}))


@contextmanager
def codec_server() -> Iterator[int]:
    """A codec server for the session's keyring on a free port, in a thread's event loop."""
    loop = asyncio.new_event_loop()
    server = loop.run_until_complete(serve_codec(CodecServer(load_keyring(TemporalConfig()), TOKEN, [UI]), 0))
    thread = Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        server.close()
        loop.run_until_complete(server.wait_closed())
        loop.close()


def post(
    port: int, path: str, body: object, headers: dict[str, str] | None = None, method: str = "POST"
) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request(
            method,
            path,
            body=json.dumps(body) if body is not None else None,
            headers={"Content-Type": "application/json", **(headers or {})},
        )
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def as_json(payload: Payload) -> dict[str, object]:
    return {
        "metadata": {k: base64.b64encode(v).decode() for k, v in payload.metadata.items()},
        "data": base64.b64encode(payload.data).decode(),
    }


def encrypted() -> Payload:
    [payload] = run(skyhop_data_converter(load_keyring(TemporalConfig()).current).encode([REQUEST]))
    return payload


def test_decode_returns_the_json_and_encode_round_trips() -> None:
    with codec_server() as port:
        status, headers, body = post(
            port,
            f"/{TOKEN}/decode",
            {"payloads": [as_json(encrypted())]},
            {"Origin": UI, "X-Namespace": "default"},
        )
        assert status == 200, body
        [decoded] = json.loads(body)["payloads"]
        assert base64.b64decode(decoded["metadata"]["encoding"]) == b"json/plain"
        assert LaunchRequest.model_validate_json(base64.b64decode(decoded["data"])) == REQUEST
        assert headers["access-control-allow-origin"] == UI
        assert headers["access-control-allow-credentials"] == "true"

        status, _, body = post(port, "/encode", {"payloads": [decoded]}, {"Authorization": f"Bearer {TOKEN}"})
        assert status == 200, body
        [again] = json.loads(body)["payloads"]
        assert SECRET not in base64.b64decode(again["data"]).decode(errors="replace")
        plain = Payload(metadata={k: base64.b64decode(v) for k, v in again["metadata"].items()})
        plain.data = base64.b64decode(again["data"])
        [value] = run(
            skyhop_data_converter(load_keyring(TemporalConfig()).current).decode([plain], [LaunchRequest])
        )
        assert value == REQUEST


def test_the_web_uis_preflight_is_granted_with_credentials() -> None:
    with codec_server() as port:
        status, headers, _ = post(
            port,
            f"/{TOKEN}/decode",
            None,
            {
                "Origin": UI,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "x-namespace",
            },
            method="OPTIONS",
        )
    assert status == 204
    assert (
        headers["access-control-allow-origin"] == UI and headers["access-control-allow-credentials"] == "true"
    )
    assert "X-Namespace" in headers["access-control-allow-headers"]
    assert "POST" in headers["access-control-allow-methods"]


@pytest.mark.parametrize(
    ("path", "headers", "status"),
    [
        ("/decode", {}, 401),  # no token
        ("/wrong-token/decode", {}, 401),
        ("/decode", {"Authorization": "Bearer wrong"}, 401),
        (f"/{TOKEN}/decode", {"Origin": "http://evil.example"}, 403),  # another web page
        (f"/{TOKEN}/decode", {"Content-Type": "text/plain;charset=UTF-8"}, 415),  # a page's simple POST
    ],
)
def test_a_request_without_the_token_or_from_another_page_gets_nothing(
    path: str, headers: dict[str, str], status: int
) -> None:
    with codec_server() as port:
        answered, _, body = post(port, path, {"payloads": [as_json(encrypted())]}, headers)
    assert answered == status, body
    assert b"payloads" not in body and b"cluster_name" not in body


def test_temporal_workflow_show_decodes_through_the_codec_endpoint(temporal_server: DevServer) -> None:
    """``temporal --codec-endpoint`` (what the Web UI does too): the history's input shown in clear."""
    workflow_id = f"codec-show-{uuid.uuid4().hex[:8]}"

    async def start() -> None:
        client = await client_for(temporal_server.address)
        await client.start_workflow(
            "NobodyRunsThis", REQUEST, id=workflow_id, task_queue=f"nobody-{uuid.uuid4().hex[:8]}"
        )

    async def terminate() -> None:
        await (await client_for(temporal_server.address)).get_workflow_handle(workflow_id).terminate()

    run(start())
    try:

        def show(*codec: str) -> str:
            return subprocess.run(
                [temporal_binary(), "workflow", "show", "--address", temporal_server.address,
                 "-w", workflow_id, "--detailed", *codec],
                capture_output=True, text=True, timeout=60, check=True,
            ).stdout  # fmt: skip

        assert SECRET not in show()
        with codec_server() as port:
            assert SECRET in show("--codec-endpoint", f"http://127.0.0.1:{port}/{TOKEN}")
            assert SECRET in show(
                "--codec-endpoint", f"http://127.0.0.1:{port}", "--codec-auth", f"Bearer {TOKEN}"
            )
    finally:
        run(terminate())
