"""Just enough HTTP/1.1 to forward a message without buffering it: heads and body framing.

A body is copied in its wire form (chunk sizes included) as its bytes arrive, so an SSE event or a
token in a chunked stream leaves the load balancer as soon as the replica writes it. Messages whose
framing is ambiguous (both ``Content-Length`` and ``Transfer-Encoding``, or several lengths) are
refused: a proxy that guesses is how requests get smuggled.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

__all__ = [
    "HEAD_LIMIT",
    "BadMessage",
    "Framing",
    "Head",
    "Outlet",
    "PeerClosed",
    "Sink",
    "copy_body",
    "parse_head",
    "read_head",
    "serve_small_requests",
]

HEAD_LIMIT = 64 * 1024
"""Longest request or response head taken (as nginx's large_client_header_buffers, 4 x 16k)."""

_COPY_SIZE = 256 * 1024
_BACKLOG = 256 * 1024
_HOP_BY_HOP = frozenset(
    {b"connection", b"keep-alive", b"proxy-connection", b"te", b"trailer", b"upgrade", b"expect"}
)
_FRAMING_OR_HOP = _HOP_BY_HOP | {b"content-length", b"transfer-encoding"}
_SPACE = frozenset(b" \t\r\n\x0b\x0c")
"""What ``bytes.strip`` takes off: a header name that starts or ends with it is refused."""


class Sink(Protocol):
    """Where a body goes (an ``Outlet``, or a buffer)."""

    def write(self, data: bytes) -> None: ...

    def backlogged(self) -> bool:
        """Whether ``drain`` must be awaited before more is written."""
        ...

    async def drain(self) -> None: ...


class Outlet:
    """A connection's writer as a ``Sink``: a write goes to the socket at once, and the wait for the
    peer to read (``drain``) happens only once a backlog builds up, which saves two awaits per
    small answer. A failed write raises ``gone`` (so the caller knows whose connection it was)."""

    __slots__ = ("_gone", "_transport", "_writer")

    def __init__(self, writer: asyncio.StreamWriter, gone: type[Exception]) -> None:
        self._writer = writer
        self._transport = writer.transport
        self._gone = gone

    def write(self, data: bytes) -> None:
        if self._transport.is_closing():
            raise self._gone("connection closed")
        self._writer.write(data)

    def backlogged(self) -> bool:
        return self._transport.get_write_buffer_size() > _BACKLOG

    async def drain(self) -> None:
        try:
            await self._writer.drain()
        except ConnectionError as exc:
            raise self._gone(str(exc)) from None


class BadMessage(Exception):
    """A head or body the peer sent is not HTTP/1.1 this proxy can forward safely."""


class PeerClosed(Exception):
    """The peer closed (or reset) its connection before the message ended."""


class Framing(Enum):
    """How the end of a body is found."""

    NONE = "none"
    LENGTH = "length"
    CHUNKED = "chunked"
    UNTIL_CLOSE = "until_close"


@dataclass(slots=True)
class Head:
    """A parsed head: the start line's parts and the headers that matter to forwarding."""

    raw: bytes
    first: tuple[bytes, bytes, bytes]
    framing: Framing
    length: int
    keep_alive: bool
    has_hop_by_hop: bool
    expects_continue: bool
    headers: list[tuple[bytes, bytes]]

    def forwardable(self, first_line: bytes | None = None) -> bytes:
        """The head without hop-by-hop headers (raw when it has none, the common case)."""
        if not self.has_hop_by_hop and first_line is None:
            return self.raw
        lines = [first_line or b" ".join(self.first)]
        lines += [name + b": " + value for name, value in self.headers if name.lower() not in _HOP_BY_HOP]
        return b"\r\n".join(lines) + b"\r\n\r\n"


async def read_head(reader: asyncio.StreamReader) -> bytes | None:
    """One head, or None when the peer closed cleanly between messages."""
    try:
        return await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if exc.partial.strip():
            raise PeerClosed("connection closed inside a head") from None
        return None
    except asyncio.LimitOverrunError:
        raise BadMessage(f"head longer than {HEAD_LIMIT} bytes") from None


def parse_head(raw: bytes, *, request: bool, no_body: bool = False) -> Head:
    """Parse ``raw``; ``no_body`` for a response to HEAD (and 1xx/204/304, found here)."""
    lines = raw[:-4].split(b"\r\n")
    first = lines[0].split(b" ", 2)
    if len(first) != 3:
        if request or len(first) != 2:
            raise BadMessage(f"bad start line {lines[0][:80]!r}")
        first.append(b"")
    version = first[0] if not request else first[2]
    if not version.startswith(b"HTTP/1."):
        raise BadMessage(f"not HTTP/1.x: {lines[0][:80]!r}")
    headers: list[tuple[bytes, bytes]] = []
    length: int | None = None
    chunked = False
    connection = b""
    hop = False
    expects_continue = False
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if not sep or not name or name[0] in _SPACE or name[-1] in _SPACE:
            raise BadMessage(f"bad header line {line[:80]!r}")
        value = value.strip()
        headers.append((name, value))
        lower = name.lower()
        if lower not in _FRAMING_OR_HOP:  # most headers: one set lookup (this runs twice a request)
            continue
        if lower == b"content-length":
            if not value.isdigit() or (length is not None and int(value) != length):
                raise BadMessage(f"bad Content-Length {value[:40]!r}")
            length = int(value)
        elif lower == b"transfer-encoding":
            if value.lower() != b"chunked":
                raise BadMessage(f"unsupported Transfer-Encoding {value[:40]!r}")
            chunked = True
        elif lower in _HOP_BY_HOP:
            hop = True
            if lower == b"connection":
                connection = value.lower()
            elif lower == b"expect" and value.lower() == b"100-continue":
                expects_continue = True
    if chunked and length is not None:
        raise BadMessage("both Content-Length and Transfer-Encoding")
    keep_alive = b"close" not in connection and (version == b"HTTP/1.1" or b"keep-alive" in connection)
    if not request:
        status = first[1]
        if no_body or status[:1] == b"1" or status in (b"204", b"304"):
            framing, length = Framing.NONE, 0
        elif chunked:
            framing = Framing.CHUNKED
        elif length is not None:
            framing = Framing.LENGTH
        else:
            framing, keep_alive = Framing.UNTIL_CLOSE, False
    elif chunked:
        framing = Framing.CHUNKED
    elif length:
        framing = Framing.LENGTH
    else:
        framing, length = Framing.NONE, 0
    return Head(
        raw, (first[0], first[1], first[2]), framing, length or 0, keep_alive, hop, expects_continue, headers
    )


async def _flush(writer: Sink) -> None:
    if writer.backlogged():
        await writer.drain()


async def _read(reader: asyncio.StreamReader, size: int) -> bytes:
    data = await reader.read(size)
    if not data:
        raise PeerClosed("connection closed inside a body")
    return data


async def _line(reader: asyncio.StreamReader) -> bytes:
    try:
        return await reader.readuntil(b"\r\n")
    except asyncio.IncompleteReadError:
        raise PeerClosed("connection closed inside a chunked body") from None
    except asyncio.LimitOverrunError:
        raise BadMessage("chunk line too long") from None


async def copy_body(
    head: Head,
    reader: asyncio.StreamReader,
    writer: Sink,
    progress: Callable[[], None] | None = None,
    prefix: bytes = b"",
) -> None:
    """Write ``prefix`` (the head), then copy ``head``'s body from ``reader`` to ``writer`` as it
    arrives, each piece flushed at once: a chunk leaves as soon as it is whole, a long body as its
    bytes come. ``prefix`` goes out with the first piece (one write, one system call, where the
    body is small: most answers).

    ``progress`` is called whenever more is to come after a piece (the caller's idle timer moves
    on: a stream may run for hours, a replica silent for the whole timeout is gone).
    """
    moved = progress or _still
    if head.framing is Framing.NONE:
        if prefix:
            writer.write(prefix)
            await _flush(writer)
    elif head.framing is Framing.LENGTH:
        remaining = head.length
        while remaining:  # _read and _flush inlined: this loop runs for most responses
            data = await reader.read(min(remaining, _COPY_SIZE))
            if not data:
                raise PeerClosed("connection closed inside a body")
            remaining -= len(data)
            writer.write(prefix + data if prefix else data)
            prefix = b""
            if writer.backlogged():
                await writer.drain()
            if remaining:
                moved()
    elif head.framing is Framing.UNTIL_CLOSE:
        if prefix:
            writer.write(prefix)
        while data := await reader.read(_COPY_SIZE):
            writer.write(data)
            await _flush(writer)
            moved()
    else:
        await _copy_chunks(reader, writer, moved, prefix)


def _still() -> None:
    pass


async def _copy_chunks(
    reader: asyncio.StreamReader, writer: Sink, progress: Callable[[], None], prefix: bytes
) -> None:
    piece = bytearray(prefix)
    while True:
        line = await _line(reader)
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise BadMessage(f"bad chunk size {line[:40]!r}") from None
        piece += line
        if size == 0:
            while True:  # trailers, then the empty line that ends the body
                trailer = await _line(reader)
                piece += trailer
                if trailer == b"\r\n":
                    writer.write(bytes(piece))
                    await _flush(writer)
                    return
        remaining = size + 2  # the data and its CRLF
        while remaining:
            data = await _read(reader, min(remaining, _COPY_SIZE))
            remaining -= len(data)
            piece += data
            if len(piece) >= _COPY_SIZE:  # a big chunk goes out as it comes
                writer.write(bytes(piece))
                piece.clear()
        writer.write(bytes(piece))
        piece.clear()
        await _flush(writer)
        progress()


Answer = Callable[[bytes, bytes, dict[bytes, bytes], bytes], bytes]
"""An endpoint: (method, path, lower-cased headers, body) -> the whole response."""


async def serve_small_requests(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    answer: Answer,
    *,
    body_limit: int,
    too_large: bytes,
    refusal: Callable[[bytes, dict[bytes, bytes]], bytes | None] | None = None,
) -> None:
    """One keep-alive connection of a small JSON endpoint (a control or codec server, not the proxy):
    each request's body read whole, at most ``body_limit`` bytes with a length (else ``too_large``
    and the connection ends), ``refusal`` (method, headers) answered before the body is read."""
    try:
        while (raw := await read_head(reader)) is not None:
            head = parse_head(raw, request=True)
            headers = {name.lower(): value for name, value in head.headers}
            if head.framing is Framing.CHUNKED or head.length > body_limit:
                writer.write(too_large)
                break
            refused = refusal(head.first[0], headers) if refusal is not None else None
            if refused is not None:
                writer.write(refused)
                break  # the body is never read
            body = await reader.readexactly(head.length)
            writer.write(answer(head.first[0], head.first[1], headers, body))
            await writer.drain()
    except (BadMessage, PeerClosed, ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        writer.close()
