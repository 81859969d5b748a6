"""A small JSON HTTP server on a loopback port that stands in for a cloud API in contract tests.

A fake routes ``(method, path regex)`` to handlers. Every request is recorded; a request whose
method, path or body breaks the API's documented contract is answered with the cloud's own error
payload *and* recorded in ``violations``, which the tests' fixtures require to be empty, so a
wrong request fails the test even when the provider would have swallowed the error.

A handler may answer with a ``Streamed`` body instead of JSON: it then writes the whole response
itself (a watch stream, a WebSocket upgrade), outside the fake's lock so other requests go on.
"""

from __future__ import annotations

import json
import re
import ssl
import threading
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.helpers import free_port

__all__ = ["ApiError", "Call", "FakeApi", "Reply", "Streamed"]

Reply = tuple[int, Any] | tuple[int, Any, dict[str, str]]
"""(status, JSON body) or (status, JSON body, extra headers). A ``bytes`` body is sent as it is
(object data, XML), with the ``Content-Type`` the headers give."""


@dataclass
class Call:
    """One request the fake received."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any
    match: dict[str, str] = field(default_factory=dict)
    raw: bytes = b""
    """The body as sent (object data, multipart and XML bodies)."""
    target: str = ""
    """The request line's path and query, still percent-encoded (what signatures cover)."""

    @property
    def raw_query(self) -> str:
        """The query string as sent (``query`` keeps one value a name; some APIs repeat names)."""
        return self.target.partition("?")[2]


class Streamed:
    """A response the handler writes itself: ``serve`` gets the request handler, after the lock."""

    def __init__(self, serve: Callable[[BaseHTTPRequestHandler], None]) -> None:
        self.serve = serve


class ApiError(Exception):
    """Raised by a handler to answer with the cloud's error payload; ``violation`` also records it."""

    def __init__(self, status: int, code: str, message: str, *, violation: bool = False) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message, self.violation = status, code, message, violation


Handler = Callable[[Call], Reply]


class FakeApi:
    """Routes, recording and the server thread; subclasses add routes and the error payload shape."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.violations: list[str] = []
        self.lock = threading.RLock()
        self._routes: list[tuple[str, re.Pattern[str], Handler]] = []
        self._server: ThreadingHTTPServer | None = None
        self.url = ""
        self.protocol_version = "HTTP/1.0"
        """``HTTP/1.1`` for APIs whose clients need chunked streams or keep-alive."""

    def route(self, method: str, pattern: str, handler: Handler) -> None:
        self._routes.append((method, re.compile(pattern + r"$"), handler))

    def error_body(self, error: ApiError) -> Any:
        raise NotImplementedError

    def check(self, condition: bool, message: str) -> None:
        """A contract rule about the request: a violation when it does not hold."""
        if not condition:
            raise ApiError(400, "InvalidRequest", message, violation=True)

    def called(self, method: str, path_part: str = "") -> list[Call]:
        return [c for c in self.calls if c.method == method and path_part in c.path]

    def dispatch(self, call: Call) -> Reply:
        with self.lock:
            self.calls.append(call)
            for method, pattern, handler in self._routes:
                found = pattern.match(call.path)
                if found and method == call.method:
                    call.match = found.groupdict()
                    try:
                        return handler(call)
                    except ApiError as error:
                        if error.violation:
                            self.violations.append(f"{call.method} {call.path}: {error.message}")
                        return self.error_reply(error)
            self.violations.append(f"unexpected request {call.method} {call.path}")
            return self.error_reply(ApiError(404, "NotFound", f"no route for {call.path}"))

    def error_reply(self, error: ApiError) -> Reply:
        """The reply to a failed request; a cloud that also names the error in a header adds it here."""
        return error.status, self.error_body(error)

    def start(self, tls: ssl.SSLContext | None = None) -> str:
        """Serve on a free loopback port (HTTPS with ``tls``); returns the base URL."""
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                parts = urllib.parse.urlsplit(self.path)
                raw = self._body()
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode(errors="replace")
                call = Call(
                    method=self.command,
                    path=urllib.parse.unquote(parts.path),
                    query=dict(urllib.parse.parse_qsl(parts.query)),
                    headers={k.lower(): v for k, v in self.headers.items()},
                    body=body,
                    raw=raw,
                    target=self.path,
                )
                status, payload, *extra = fake.dispatch(call)
                if isinstance(payload, Streamed):
                    payload.serve(self)
                    return
                raw_reply = isinstance(payload, bytes)
                kind = "application/octet-stream" if raw_reply else "application/json; charset=utf-8"
                headers = {"Content-Type": kind, **(extra[0] if extra else {})}
                data = payload if raw_reply else b"" if payload is None else json.dumps(payload).encode()
                self.send_response(status)
                head = self.command == "HEAD"  # the headers of a GET, its Content-Length included
                if not (head and "Content-Length" in headers):
                    headers["Content-Length"] = str(len(data))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                if not head:
                    self.wfile.write(data)

            def _body(self) -> bytes:
                """The request body, of a Content-Length or sent in chunks (as Go's clients stream one)."""
                if self.headers.get("Transfer-Encoding", "").lower() != "chunked":
                    length = int(self.headers.get("Content-Length") or 0)
                    return self.rfile.read(length) if length else b""
                chunks = []
                while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline()
                while self.rfile.readline().strip():  # trailers, up to the blank line
                    pass
                return b"".join(chunks)

            do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

            def log_message(self, format: str, *args: Any) -> None:
                pass

        Handler.protocol_version = self.protocol_version
        self._server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self._server.daemon_threads = True
        if tls is not None:
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True)
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()
        scheme = "https" if tls is not None else "http"
        self.url = f"{scheme}://127.0.0.1:{self._server.server_address[1]}"
        return self.url

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
