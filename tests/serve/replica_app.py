"""A small HTTP replica for the load balancer's tests and benchmark: ``python -m tests.serve.replica_app``.

Routes (every answer names the replica, so a test sees who served it):

- ``GET /`` and ``GET /id``: ``replica <id>`` (the benchmark's request);
- ``POST /echo``: the body back;
- ``GET /sse``: an SSE stream of a ``first`` event, then, once ``GET /release`` came, a ``last``;
- ``GET /ticks``: an event every 50 ms, for ever (a client that leaves is what ends it);
- ``GET /slow?seconds=S``: answers after S seconds;
- ``GET /count``: how many requests other than ``/count`` and ``/release`` it has seen.

``--one-per-connection`` makes it close a connection cleanly, without answering, when a second
request comes on it (a replica whose idle timeout closed a kept-alive connection as the load balancer
reused it). ``--reset`` makes it read each request (but ``/count`` and ``/release``) and then reset the
connection without a byte of answer (a replica dying mid-request). It prints ``ready <port>`` once it listens,
on ``--host`` (127.0.0.1 unless told).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import socket
import struct

from skyhop.serve.http1 import Framing, copy_body, parse_head, read_head


def _answer(body: bytes, content_type: bytes = b"text/plain") -> bytes:
    return (
        b"HTTP/1.1 200 OK\r\nContent-Type: "
        + content_type
        + b"\r\nContent-Length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
        + body
    )


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def _dechunk(wire: bytes) -> bytes:
    data = b""
    while True:
        line, _, wire = wire.partition(b"\r\n")
        size = int(line.split(b";")[0], 16)
        if size == 0:
            return data
        data, wire = data + wire[:size], wire[size + 2 :]


class _Body:
    """Collects a request body, whatever its framing (httpx streams even an empty one chunked)."""

    def __init__(self) -> None:
        self.data = bytearray()

    def write(self, data: bytes) -> None:
        self.data += data

    def backlogged(self) -> bool:
        return False

    async def drain(self) -> None:
        pass


class Replica:
    def __init__(self, replica_id: int, reset: bool, one_per_connection: bool = False) -> None:
        self.one_per_connection = one_per_connection
        self.name = f"replica {replica_id}".encode()
        self.reset = reset
        self.seen = 0
        self.release = asyncio.Event()
        self.hello = _answer(self.name)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        served = 0
        try:
            while (raw := await read_head(reader)) is not None:
                if served and self.one_per_connection:
                    return
                served += 1
                head = parse_head(raw, request=True)
                sink = _Body()
                await copy_body(head, reader, sink, None)
                body = _dechunk(bytes(sink.data)) if head.framing is Framing.CHUNKED else bytes(sink.data)
                method, target = head.first[0], head.first[1]
                path, _, query = target.partition(b"?")
                ours = path in (b"/count", b"/release")  # the test's own questions
                if not ours:
                    self.seen += 1
                if self.reset and not ours:
                    sock = writer.get_extra_info("socket")
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    writer.transport.abort()
                    return
                if path in (b"/", b"/id"):
                    writer.write(self.hello)
                elif path == b"/echo" and method == b"POST":
                    writer.write(_answer(body))
                elif path == b"/count":
                    writer.write(_answer(str(self.seen).encode()))
                elif path == b"/release":
                    self.release.set()
                    writer.write(_answer(b"released"))
                elif path == b"/slow":
                    await asyncio.sleep(float(query.partition(b"=")[2] or b"1"))
                    writer.write(self.hello)
                elif path in (b"/sse", b"/ticks"):
                    await self._stream(writer, forever=path == b"/ticks")
                    if path == b"/ticks":
                        return
                else:
                    writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def _stream(self, writer: asyncio.StreamWriter, forever: bool) -> None:
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        writer.write(_chunk(b"data: first from " + self.name + b"\n\n"))
        await writer.drain()
        if forever:
            while True:
                await asyncio.sleep(0.05)
                writer.write(_chunk(b"data: tick\n\n"))
                await writer.drain()
        await self.release.wait()
        self.release.clear()
        writer.write(_chunk(b"data: last\n\n") + b"0\r\n\r\n")


async def _serve(host: str, port: int, replica: Replica) -> None:
    server = await asyncio.start_server(replica.handle, host, port, backlog=1024)
    print(f"ready {server.sockets[0].getsockname()[1]}", flush=True)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--id", type=int, default=0)
    parser.add_argument("--reset", action="store_true")
    parser.add_argument("--one-per-connection", action="store_true")
    args = parser.parse_args()
    runner = asyncio.run
    with contextlib.suppress(ImportError):
        import uvloop

        runner = uvloop.run
    runner(_serve(args.host, args.port, Replica(args.id, args.reset, args.one_per_connection)))


if __name__ == "__main__":
    main()
