"""The load balancer's control port: replica sets pushed in, request counts read out.

Only the user's own programs may drive it, never a web page the user visits: every request must
carry ``Authorization: Bearer <token>`` (the token file is the user's, mode 0600) and, with a body,
``Content-Type: application/json``. A browser sends neither cross-site without a CORS preflight,
which this port never grants; a request with an ``Origin`` header (every cross-site fetch has one)
is refused outright. The port binds loopback only.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import os
import secrets
import stat
from pathlib import Path

from pydantic import ValidationError

from skyhop.contract.serve import ReplicaSetAccepted, ReplicaSetUpdate
from skyhop.serve.http1 import serve_small_requests
from skyhop.serve.replicas import ReplicaSet

__all__ = ["ControlServer", "TokenFileError", "create_token_file", "read_token_file"]

_BODY_LIMIT = 1024 * 1024
_log = logging.getLogger(__name__)


class TokenFileError(Exception):
    """The token file is missing, unreadable, empty, or readable by others than its owner."""


def create_token_file(path: Path) -> str:
    """Write a new random token to ``path``, readable by its owner only, and return it."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as file:
        os.fchmod(file.fileno(), 0o600)
        file.write(token + "\n")
    return token


def read_token_file(path: Path) -> str:
    """The token in ``path``; refused if group or others could read it too."""
    try:
        mode = path.stat().st_mode
        token = path.read_text().strip()
    except OSError as exc:
        raise TokenFileError(f"token file {path}: {exc.strerror}") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise TokenFileError(
            f"token file {path} is mode {stat.S_IMODE(mode):04o}; it must be 0600 (chmod 600 {path})"
        )
    if not token:
        raise TokenFileError(f"token file {path} is empty")
    return token


def _response(status: bytes, payload: str) -> bytes:
    body = payload.encode()
    return (
        b"HTTP/1.1 "
        + status
        + b"\r\nContent-Type: application/json\r\nContent-Length: "
        + str(len(body)).encode()
        + b"\r\nConnection: keep-alive\r\n\r\n"
        + body
    )


def _error(status: bytes, message: str) -> bytes:
    return _response(status, json.dumps({"error": message}))


class ControlServer:
    """Serves control connections (``asyncio.start_server``'s callback is ``handle``)."""

    def __init__(self, replicas: ReplicaSet, token: str) -> None:
        self.replicas = replicas
        self._expected = f"Bearer {token}".encode()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        too_large = _error(b"413 Content Too Large", f"send at most {_BODY_LIMIT} bytes, with a length")
        await serve_small_requests(reader, writer, self._answer, body_limit=_BODY_LIMIT, too_large=too_large)

    def _answer(self, method: bytes, path: bytes, headers: dict[bytes, bytes], body: bytes) -> bytes:
        if b"origin" in headers:
            return _error(b"403 Forbidden", "requests from web pages are refused")
        if not hmac.compare_digest(headers.get(b"authorization", b""), self._expected):
            return _error(b"401 Unauthorized", "send Authorization: Bearer <the token file's token>")
        json_body = headers.get(b"content-type", b"").split(b";")[0].strip() == b"application/json"
        if (body or method != b"GET") and not json_body:
            return _error(b"415 Unsupported Media Type", "send Content-Type: application/json")
        if path == b"/v1/stats" and method == b"GET":
            return _response(b"200 OK", self.replicas.stats().model_dump_json())
        if path == b"/v1/replicas" and method == b"PUT":
            try:
                update = ReplicaSetUpdate.model_validate_json(body)
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(part) for part in first["loc"])
                return _error(b"422 Unprocessable Content", f"{where}: {first['msg']}")
            self.replicas.replace(update.replicas)
            listed = ", ".join(f"{r.replica_id}={r.host}:{r.port}" for r in update.replicas) or "none"
            _log.info("replica set %d: %s", self.replicas.generation, listed)
            accepted = ReplicaSetAccepted(generation=self.replicas.generation, replicas=len(update.replicas))
            return _response(b"200 OK", accepted.model_dump_json())
        return _error(b"404 Not Found", "PUT /v1/replicas or GET /v1/stats")
