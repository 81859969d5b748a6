"""A worker started with its Temporal server (embedded, docker-compose) waits for the frontend."""

from __future__ import annotations

import asyncio
import base64
import os

import grpc
import pytest
from temporalio.api.workflowservice.v1 import GetSystemInfoResponse

from skyhop.cli import client as client_module
from skyhop.cli.config import TemporalConfig

_SYSTEM_INFO = "/temporal.api.workflowservice.v1.WorkflowService/GetSystemInfo"


class _StartingFrontend(grpc.GenericRpcHandler):
    """Answers GetSystemInfo the way a dev server does while its frontend starts, then normally."""

    def __init__(self, unhealthy_answers: int, status: grpc.StatusCode, message: str) -> None:
        self.left = unhealthy_answers
        self.status = status
        self.message = message
        self.calls = 0

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        if handler_call_details.method != _SYSTEM_INFO:
            return None

        async def answer(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
            self.calls += 1
            if self.left > 0:
                self.left -= 1
                await context.abort(self.status, self.message)
            return GetSystemInfoResponse().SerializeToString()

        return grpc.unary_unary_rpc_method_handler(answer)


async def _connect_to(frontend: _StartingFrontend) -> None:
    server = grpc.aio.server(handlers=[frontend])
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        config = TemporalConfig(key=base64.b64encode(os.urandom(32)).decode())
        await asyncio.wait_for(client_module.connect(config, f"127.0.0.1:{port}"), 30)
    finally:
        await server.stop(None)


def test_a_frontend_still_starting_is_waited_for() -> None:
    frontend = _StartingFrontend(3, grpc.StatusCode.UNAVAILABLE, "Frontend is not healthy yet")
    asyncio.run(_connect_to(frontend))
    assert frontend.left == 0 and frontend.calls >= 4


def test_any_other_refusal_is_final() -> None:
    frontend = _StartingFrontend(3, grpc.StatusCode.PERMISSION_DENIED, "Request unauthorized.")
    with pytest.raises(RuntimeError, match="Request unauthorized"):
        asyncio.run(_connect_to(frontend))
    assert frontend.calls == 1
