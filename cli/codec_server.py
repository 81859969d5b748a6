"""The codec server: Temporal's remote codec protocol, so the Web UI and ``temporal`` show payloads.

``POST <endpoint>/decode`` and ``<endpoint>/encode`` take and return ``{"payloads": [...]}`` (each
payload as protobuf JSON: ``metadata`` values and ``data`` base64). Decoding returns a payload
encrypted with a key of the keyring in clear, and any other payload unchanged (the Web UI shows it
as it is); encoding encrypts with the newest key.

Whoever can use it reads every payload and can write ones the worker accepts, so it is guarded:

- it listens on 127.0.0.1 only (put a reverse proxy with your auth in front to share it);
- every request carries the token (the owner-only token file's): in the path, as the endpoint
  ``http://127.0.0.1:PORT/<token>`` (how the Web UI, which can add no header, sends it), or as
  ``Authorization: Bearer <token>`` (``temporal --codec-auth``);
- a request from a web page (it has an ``Origin``) is answered only for the allowed origins (the
  Web UI's), with CORS and ``Access-Control-Allow-Credentials`` for them; any other is refused;
- a body must be ``Content-Type: application/json``: a ``text/plain`` POST, the one a page can send
  without asking, is refused before anything is read.
"""

from __future__ import annotations

import asyncio
import hmac
import json
from collections.abc import Sequence
from pathlib import Path

from google.protobuf import json_format
from temporalio.api.common.v1 import Payload, Payloads

from skyhop.cli.config import ConfigError, TemporalConfig
from skyhop.cli.embedded import ServerError
from skyhop.cli.payload_key import load_keyring
from skyhop.contract.codec import ENCRYPTED_ENCODING, UNAUTHENTICATED_ENCODING, EncryptingCodec, Keyring
from skyhop.providers.home import private_dir, skyhop_home
from skyhop.serve.control import TokenFileError, create_token_file, read_token_file
from skyhop.serve.http1 import serve_small_requests

__all__ = ["CodecServer", "codec_token", "endpoint", "serve_codec", "start_codec", "token_file"]

_BODY_LIMIT = 8 * 1024 * 1024
_ALLOWED_HEADERS = "Content-Type, X-Namespace, Authorization"


class CodecServer:
    """Answers codec requests (``asyncio.start_server``'s callback is ``handle``)."""

    def __init__(self, keyring: Keyring, token: str, origins: Sequence[str]) -> None:
        self._codec = EncryptingCodec(keyring)
        self._token = token.encode()
        self._origins = frozenset(origin.rstrip("/").encode() for origin in origins)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        too_large = _answer(413, {"error": f"send at most {_BODY_LIMIT} bytes, with a length"})
        await serve_small_requests(
            reader, writer, self._respond, body_limit=_BODY_LIMIT, too_large=too_large, refusal=self._refusal
        )

    def _cors(self, headers: dict[bytes, bytes]) -> list[tuple[str, str]]:
        origin = headers.get(b"origin")
        if origin is None:
            return []
        return [
            ("Access-Control-Allow-Origin", origin.decode()),
            ("Access-Control-Allow-Credentials", "true"),
            ("Vary", "Origin"),
        ]

    def _refusal(self, method: bytes, headers: dict[bytes, bytes]) -> bytes | None:
        """The answer to a request refused on its head alone, or None."""
        origin = headers.get(b"origin")
        if origin is not None and origin.rstrip(b"/") not in self._origins:
            return _answer(403, {"error": "this origin may not use the codec server (see --origin)"})
        if method == b"OPTIONS":
            return _answer(
                204,
                None,
                [
                    *self._cors(headers),
                    ("Access-Control-Allow-Methods", "POST, OPTIONS"),
                    ("Access-Control-Allow-Headers", _ALLOWED_HEADERS),
                    ("Access-Control-Max-Age", "600"),
                ],
            )
        if headers.get(b"content-type", b"").split(b";")[0].strip().lower() != b"application/json":
            return _answer(415, {"error": "send Content-Type: application/json"}, self._cors(headers))
        return None

    def _authorized(self, path: bytes, headers: dict[bytes, bytes]) -> bytes | None:
        """The operation (``/encode`` or ``/decode``) if the request carries the token, else None."""
        bearer = headers.get(b"authorization", b"")
        prefix, _, operation = path.split(b"?")[0].rpartition(b"/")
        if hmac.compare_digest(bearer, b"Bearer " + self._token) and prefix == b"":
            return operation
        if hmac.compare_digest(prefix, b"/" + self._token):
            return operation
        return None

    def _respond(self, method: bytes, path: bytes, headers: dict[bytes, bytes], body: bytes) -> bytes:
        cors = self._cors(headers)
        operation = self._authorized(path, headers)
        if operation is None:
            return _answer(
                401,
                {"error": "send the token: endpoint http://HOST:PORT/<token>, or Authorization: Bearer it"},
                cors,
            )
        if method != b"POST" or operation not in (b"encode", b"decode"):
            return _answer(404, {"error": "POST <endpoint>/encode or <endpoint>/decode"}, cors)
        try:
            payloads = json_format.Parse(body, Payloads(), ignore_unknown_fields=True).payloads
        except (json_format.ParseError, UnicodeDecodeError) as exc:
            return _answer(400, {"error": f'expected {{"payloads": [...]}}: {exc}'}, cors)
        converted = [self._codec.encrypt(p) if operation == b"encode" else self._decoded(p) for p in payloads]
        return _answer(200, json_format.MessageToDict(Payloads(payloads=converted)), cors)

    def _decoded(self, payload: Payload) -> Payload:
        """In clear if it is ours and authenticates; otherwise as it came."""
        if payload.metadata.get("encoding") != ENCRYPTED_ENCODING.encode():
            return payload
        plain = self._codec.decrypt(payload)
        return payload if plain.metadata.get("encoding") == UNAUTHENTICATED_ENCODING.encode() else plain


_REASONS = {200: "OK", 204: "No Content", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden",
            404: "Not Found", 413: "Content Too Large", 415: "Unsupported Media Type"}  # fmt: skip


def _answer(status: int, payload: object, extra: Sequence[tuple[str, str]] = ()) -> bytes:
    body = b"" if payload is None else json.dumps(payload).encode()
    lines = [f"HTTP/1.1 {status} {_REASONS[status]}", f"Content-Length: {len(body)}"]
    if payload is not None:
        lines.append("Content-Type: application/json")
    lines += [f"{name}: {value}" for name, value in extra]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def serve_codec(server: CodecServer, port: int) -> asyncio.Server:
    """Listen on 127.0.0.1:``port`` (0: any free port; the caller reads it from the result)."""
    return await asyncio.start_server(server.handle, "127.0.0.1", port)


def token_file() -> Path:
    """``~/.skyhop/codec-token``: the codec server's token, owner-only, created on first use."""
    return skyhop_home() / "codec-token"


def codec_token() -> str:
    """The token every codec request must carry (a new one is made if there is none)."""
    path = token_file()
    if not path.exists():
        private_dir(path.parent)
        return create_token_file(path)
    try:
        return read_token_file(path)
    except TokenFileError as exc:
        raise ConfigError(str(exc)) from None


def endpoint(port: int, token: str) -> str:
    """The URL to give the Web UI (its codec settings) or ``temporal --codec-endpoint``."""
    return f"http://127.0.0.1:{port}/{token}"


async def start_codec(
    config: TemporalConfig, port: int, origins: Sequence[str]
) -> tuple[asyncio.Server, str]:
    """A codec server for this user's keyring on 127.0.0.1:``port``, and its endpoint."""
    token = codec_token()
    try:
        server = await serve_codec(CodecServer(load_keyring(config), token, origins), port)
    except OSError as exc:
        raise ServerError(
            f"the codec server cannot listen on 127.0.0.1:{port} ({exc.strerror}); choose another port"
        ) from None
    bound = server.sockets[0].getsockname()[1]
    return server, endpoint(bound, token)
