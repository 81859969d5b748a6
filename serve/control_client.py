"""Talking to a load balancer's control port: push the READY set, read the request counts.

The controller's activities, the tests and the benchmark all use this one client.
"""

from __future__ import annotations

import asyncio
import json

from skyhop.contract.serve import LoadBalancerStats, ReplicaEndpoint, ReplicaSetAccepted, ReplicaSetUpdate
from skyhop.serve.http1 import parse_head, read_head

__all__ = ["ControlError", "LoadBalancerControl"]


class ControlError(Exception):
    """The load balancer refused a control request or could not be reached."""


class LoadBalancerControl:
    """A load balancer's control port on loopback, with the token from its token file."""

    def __init__(self, port: int, token: str, timeout: float = 10.0) -> None:
        self.port = port
        self._token = token
        self.timeout = timeout

    async def push(self, replicas: list[ReplicaEndpoint]) -> ReplicaSetAccepted:
        """Make ``replicas`` the READY set; in force once this returns."""
        body = ReplicaSetUpdate(replicas=replicas).model_dump_json().encode()
        return ReplicaSetAccepted.model_validate_json(await self._request(b"PUT", b"/v1/replicas", body))

    async def stats(self) -> LoadBalancerStats:
        return LoadBalancerStats.model_validate_json(await self._request(b"GET", b"/v1/stats", b""))

    async def _request(self, method: bytes, path: bytes, body: bytes) -> bytes:
        try:
            return await asyncio.wait_for(self._exchange(method, path, body), self.timeout)
        except (OSError, TimeoutError, asyncio.IncompleteReadError) as exc:
            raise ControlError(
                f"load balancer control port {self.port}: {exc or type(exc).__name__}"
            ) from None

    async def _exchange(self, method: bytes, path: bytes, body: bytes) -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        try:
            writer.write(
                method
                + b" "
                + path
                + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "
                + self._token.encode()
                + b"\r\nContent-Type: application/json\r\nContent-Length: "
                + str(len(body)).encode()
                + b"\r\nConnection: close\r\n\r\n"
                + body
            )
            await writer.drain()
            raw = await read_head(reader)
            if raw is None:
                raise ControlError(f"load balancer control port {self.port} closed without answering")
            head = parse_head(raw, request=False)
            answer = await reader.readexactly(head.length)
        finally:
            writer.close()
        if head.first[1] != b"200":
            message = json.loads(answer).get("error", "") if answer else ""
            raise ControlError(
                f"load balancer refused {method.decode()} {path.decode()}: {head.first[1].decode()} {message}"
            )
        return answer
