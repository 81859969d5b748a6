"""The service endpoint: each client request goes to a READY replica, its response streams back.

A request is retried on a *different* replica when the replica could not have acted on it: the
connection was refused or failed before a byte was sent, or the method is idempotent and the
replica failed before answering a byte. A kept-alive connection the replica had closed (a clean
close, nothing read) is retried on a new connection, to any replica, that one included. Once the
response has started, the client gets exactly what the replica sends, as it sends it; if the
replica dies mid-body the client's connection is closed (a truncated body must not look whole).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass

from skyhop.serve.http1 import (
    HEAD_LIMIT,
    BadMessage,
    Framing,
    Head,
    Outlet,
    PeerClosed,
    copy_body,
    parse_head,
    read_head,
)
from skyhop.serve.idle import IdleTimers
from skyhop.serve.replicas import Connection, Replica, ReplicaSet

__all__ = ["Proxy", "ProxyTimeouts"]

_IDEMPOTENT = frozenset({b"GET", b"HEAD", b"OPTIONS", b"PUT", b"DELETE", b"TRACE"})
_RETRYABLE_BODY = 1024 * 1024
"""Request bodies up to this size are read first, so a retry can send them again."""
_CONNECTION_ERRORS = (OSError, PeerClosed, asyncio.IncompleteReadError)


@dataclass(frozen=True)
class ProxyTimeouts:
    """How long the load balancer waits, in seconds."""

    connect: float = 5.0
    """For a replica to accept a connection. Default 5 s."""
    response: float = 600.0
    """For a replica's next bytes: the response head, then each piece of its body. Default 600 s
    (an LLM may think for minutes before its first token)."""
    hold: float = 120.0
    """For a READY replica while there is none (scale from zero), then 503. Default 120 s."""


class _ClientGone(Exception):
    """The client's connection failed while its response was being written."""


class _ReplicaFailed(Exception):
    """This attempt failed; ``retry`` says whether another replica may take the request, ``stale``
    that the replica only had closed an idle kept-alive connection (it is fine: try it again too)."""

    def __init__(self, retry: bool, status: bytes, reason: str, stale: bool = False) -> None:
        super().__init__(reason)
        self.retry = retry
        self.status = status
        self.stale = stale


def _error_response(status: bytes, message: str, keep_alive: bool = True) -> bytes:
    body = (message + "\n").encode()
    connection = b"keep-alive" if keep_alive else b"close"
    return (
        b"HTTP/1.1 "
        + status
        + b"\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: "
        + str(len(body)).encode()
        + b"\r\nConnection: "
        + connection
        + b"\r\n\r\n"
        + body
    )


class Proxy:
    """Serves client connections (``asyncio.start_server``'s callback is ``handle``)."""

    def __init__(self, replicas: ReplicaSet, timeouts: ProxyTimeouts) -> None:
        self.replicas = replicas
        self.timeouts = timeouts
        self._idle_timers = IdleTimers(tick=min(timeouts.response / 4, 1.0))

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await self._one_request(reader, writer):
                pass
        except (_ClientGone, ConnectionError, PeerClosed, TimeoutError):
            pass
        except BadMessage as exc:
            with contextlib.suppress(ConnectionError):
                writer.write(_error_response(b"400 Bad Request", str(exc), keep_alive=False))
                await writer.drain()
        finally:
            writer.close()

    async def _one_request(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Forward one request; False when the client connection is done."""
        raw = await read_head(reader)
        if raw is None:
            return False
        head = parse_head(raw, request=True)
        self.replicas.demand.add(time.monotonic())
        if head.expects_continue:
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        body: bytes | None = b""
        if head.framing is Framing.LENGTH and head.length <= _RETRYABLE_BODY:
            body = await reader.readexactly(head.length)
        elif head.framing is not Framing.NONE:
            body = None  # streamed from the client: retried only if no byte of it was sent
        outgoing = head.forwardable()
        idempotent = head.first[0] in _IDEMPOTENT
        tried: set[int] = set()
        last = ""
        while True:
            replica = self.replicas.pick(tried)
            if replica is None:
                if tried:
                    message = f"no replica could answer ({len(tried)} tried; last: {last})"
                    return await self._fail(writer, b"502 Bad Gateway", message)
                if not await self.replicas.wait_for_replicas(self.timeouts.hold):
                    message = f"no READY replica within {self.timeouts.hold:g}s"
                    return await self._fail(writer, b"503 Service Unavailable", message)
                continue
            tried.add(replica.endpoint.replica_id)
            try:
                with self.replicas.sending(replica):
                    connection = replica.take_idle()  # most requests: no await, no coroutine
                    reused = connection is not None
                    if connection is None:
                        connection = await self._connect(replica)
                    else:
                        self.replicas.accepted(replica)
                    return await self._exchange(
                        replica, connection, reused, head, outgoing, body, idempotent, reader, writer
                    )
            except _ReplicaFailed as failure:
                if failure.stale:  # a new connection to the same replica may serve it
                    tried.discard(replica.endpoint.replica_id)
                    continue
                replica.failed += 1
                if not failure.retry:
                    return await self._fail(writer, failure.status, str(failure))
                last = str(failure)

    async def _fail(self, writer: asyncio.StreamWriter, status: bytes, message: str) -> bool:
        writer.write(_error_response(status, message))
        await writer.drain()
        return True

    async def _connect(self, replica: Replica) -> Connection:
        """A new connection (there was no kept-alive one); a refusal cools the replica down."""
        endpoint = replica.endpoint
        try:
            async with asyncio.timeout(self.timeouts.connect):
                connection = await asyncio.open_connection(endpoint.host, endpoint.port, limit=HEAD_LIMIT)
        except (OSError, TimeoutError) as exc:
            self.replicas.refused(replica)
            raise _ReplicaFailed(True, b"502 Bad Gateway", f"replica {endpoint.replica_id}: {exc}") from None
        self.replicas.accepted(replica)
        return connection

    async def _exchange(
        self,
        replica: Replica,
        connection: Connection,
        reused: bool,
        head: Head,
        outgoing: bytes,
        body: bytes | None,
        idempotent: bool,
        client_reader: asyncio.StreamReader,
        client: asyncio.StreamWriter,
    ) -> bool:
        """One request and its response over ``connection``, which is kept only if both ended cleanly."""
        upstream_reader, upstream = connection
        wait = self.timeouts.response
        response: Head | None = None
        reusable = False
        try:
            try:
                # One idle timer for the whole exchange, moved on as bytes come.
                with self._idle_timers.timer(wait) as timer:
                    progress = timer.moved
                    response = await self._send(
                        replica,
                        head,
                        outgoing,
                        body,
                        idempotent,
                        reused,
                        client_reader,
                        upstream_reader,
                        upstream,
                        progress,
                    )
                    if response.first[1] == b"101":
                        timer.disable()
                        await self._tunnel(response.raw, client_reader, client, upstream_reader, upstream)
                        return False
                    forwarded = response.forwardable()
                    await copy_body(
                        response, upstream_reader, Outlet(client, _ClientGone), progress, forwarded
                    )
            except TimeoutError:
                if response is None:
                    message = f"replica {replica.endpoint.replica_id} sent nothing for {wait:g}s"
                    raise _ReplicaFailed(False, b"504 Gateway Timeout", message) from None
                return False  # silent mid-body: close the client's connection too
            except _ClientGone:
                raise
            except (*_CONNECTION_ERRORS, BadMessage):
                return False  # the replica broke mid-body: close the client's connection too
            reusable = response.keep_alive
            return head.keep_alive and response.framing is not Framing.UNTIL_CLOSE
        finally:
            if reusable:
                replica.give_back(connection)
            else:
                upstream.close()

    async def _send(
        self,
        replica: Replica,
        head: Head,
        outgoing: bytes,
        body: bytes | None,
        idempotent: bool,
        reused: bool,
        client_reader: asyncio.StreamReader,
        upstream_reader: asyncio.StreamReader,
        upstream: asyncio.StreamWriter,
        progress: Callable[[], None],
    ) -> Head:
        """Send the request and read the final response head (interim 1xx but 101 skipped)."""
        no_body = head.first[0] == b"HEAD"
        streamed = body is None
        answered = False
        closed_unanswered = False
        try:
            if body is None:
                await copy_body(head, client_reader, Outlet(upstream, PeerClosed), progress, outgoing)
            else:
                upstream.write(outgoing + body if body else outgoing)
            while True:
                raw = await read_head(upstream_reader)
                if raw is None:
                    closed_unanswered = True
                    raise PeerClosed("closed the connection before answering")
                answered = True
                response = parse_head(raw, request=False, no_body=no_body)
                if response.first[1][:1] != b"1" or response.first[1] == b"101":
                    return response
        except BadMessage as exc:
            message = f"replica {replica.endpoint.replica_id} answered badly: {exc}"
            raise _ReplicaFailed(False, b"502 Bad Gateway", message) from None
        except _CONNECTION_ERRORS as exc:
            # A kept-alive connection the replica closed (a clean close, no byte back) is the race of
            # its idle timeout: it never read the request, whatever the method. Any other failure
            # after sending may have acted: only an idempotent request may run twice.
            stale = not streamed and reused and closed_unanswered
            retry = stale or (not streamed and not answered and idempotent)
            message = f"replica {replica.endpoint.replica_id}: {exc}"
            raise _ReplicaFailed(retry, b"502 Bad Gateway", message, stale) from None

    async def _tunnel(
        self,
        raw: bytes,
        client_reader: asyncio.StreamReader,
        client: asyncio.StreamWriter,
        upstream_reader: asyncio.StreamReader,
        upstream: asyncio.StreamWriter,
    ) -> None:
        """After ``101 Switching Protocols`` (WebSocket): bytes both ways until either side closes."""
        client.write(raw)

        async def pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            with contextlib.suppress(*_CONNECTION_ERRORS):
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            sink.close()

        await asyncio.gather(pump(client_reader, upstream), pump(upstream_reader, client))
