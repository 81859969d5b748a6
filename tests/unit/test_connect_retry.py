"""A worker started with its Temporal server (embedded, docker-compose) waits for the frontend."""

from __future__ import annotations

import asyncio
import base64
import os
import socket
import struct

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


def _config() -> TemporalConfig:
    return TemporalConfig(key=base64.b64encode(os.urandom(32)).decode())


async def _connect_to(frontend: _StartingFrontend) -> None:
    server = grpc.aio.server(handlers=[frontend])
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        await asyncio.wait_for(client_module.connect(_config(), f"127.0.0.1:{port}"), 30)
    finally:
        await server.stop(None)


class _Resetting:
    """A listener that drops its first connections with a TCP reset, as a restarting server's
    socket may, then gives its port to a working frontend."""

    def __init__(self, resets: int) -> None:
        self.left = resets
        self.dropped = asyncio.Event()

    async def drop(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.get_extra_info("socket").setsockopt(
            socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
        )
        writer.transport.abort()
        self.left -= 1
        if self.left <= 0:
            self.dropped.set()


async def _connect_through_resets(server_starting: bool) -> _StartingFrontend:
    resetting = _Resetting(3)
    listener = await asyncio.start_server(resetting.drop, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    frontend = _StartingFrontend(0, grpc.StatusCode.OK, "")
    server = grpc.aio.server(handlers=[frontend])

    async def hand_over() -> None:
        await resetting.dropped.wait()
        listener.close()
        await listener.wait_closed()
        server.add_insecure_port(f"127.0.0.1:{port}")
        await server.start()

    handing = asyncio.create_task(hand_over())
    try:
        address = f"127.0.0.1:{port}"
        await asyncio.wait_for(client_module.connect(_config(), address, server_starting=server_starting), 30)
    finally:
        handing.cancel()
        listener.close()
        await server.stop(None)
    return frontend


def test_a_frontend_still_starting_is_waited_for() -> None:
    frontend = _StartingFrontend(3, grpc.StatusCode.UNAVAILABLE, "Frontend is not healthy yet")
    asyncio.run(_connect_to(frontend))
    assert frontend.left == 0 and frontend.calls >= 4


def test_any_other_refusal_is_final() -> None:
    frontend = _StartingFrontend(3, grpc.StatusCode.PERMISSION_DENIED, "Request unauthorized.")
    with pytest.raises(RuntimeError, match="Request unauthorized"):
        asyncio.run(_connect_to(frontend))
    assert frontend.calls == 1


def test_a_server_starting_with_this_process_is_waited_for_through_resets() -> None:
    """The worker started with its server (or after the server restarted) keeps asking."""
    frontend = asyncio.run(_connect_through_resets(server_starting=True))
    assert frontend.calls >= 1


def test_a_reset_from_a_configured_address_is_final() -> None:
    """A user's own address that drops the connection (wrong port, TLS mismatch) fails at once."""
    with pytest.raises(RuntimeError, match='ConnectionReset|BrokenPipe|"connection closed"'):
        asyncio.run(_connect_through_resets(server_starting=False))


_CLOSED_MID_HANDSHAKE = (
    "Failed client connect: `get_system_info` call error after connection: Status { code: Cancelled, "
    'message: "operation was canceled", source: Some(tonic::transport::Error(Transport, '
    'hyper::Error(Canceled, "connection closed"))) }'
)
"""How the SDK's core words a reset that lands once the HTTP/2 handshake began (seen in CI: the
reset test's listener drops connections at whatever point the client reached)."""


def test_a_connection_closed_mid_handshake_is_a_reset_too() -> None:
    assert client_module._still_starting(_CLOSED_MID_HANDSHAKE, server_starting=True)
    assert not client_module._still_starting(_CLOSED_MID_HANDSHAKE, server_starting=False)
    cancelled = 'Status { code: Cancelled, message: "operation was canceled" }'  # no dropped connection
    assert not client_module._still_starting(cancelled, server_starting=True)
