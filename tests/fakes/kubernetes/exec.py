"""``pods/{name}/exec`` over WebSocket with the ``v4.channel.k8s.io`` / ``v5.channel.k8s.io`` subprotocols.

Each message's first byte is its channel: 0 stdin (client to server), 1 stdout, 2 stderr, 3 the
final ``Status`` as JSON (``Success``, or ``Failure`` with reason ``NonZeroExitCode`` and the exit code
in ``details.causes``), 4 terminal resize. v5 adds 255: ``[255, 0]`` from the client closes stdin.
The command runs inside the pod's sandbox (its network, hostname and home) with the container's
environment and working folder, as a CRI exec does; ``tty=true`` gives it a pseudo-terminal.
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
import threading
import urllib.parse
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import IO, Any

from tests.fakes.kubernetes.kubelet import Container, PodRun
from tests.fakes.kubernetes.status import StatusError
from tests.fakes.kubernetes.websocket import BINARY, WebSocket, accept_key

__all__ = ["PROTOCOLS", "exec_session"]

PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")
STDIN, STDOUT, STDERR, ERROR, RESIZE, CLOSE = 0, 1, 2, 3, 4, 255


def _flag(params: dict[str, list[str]], name: str) -> bool:
    return (params.get(name) or ["false"])[-1].lower() in ("1", "t", "true")


def _result(code: int) -> dict[str, Any]:
    if code == 0:
        return {"metadata": {}, "status": "Success"}
    return {
        "metadata": {},
        "status": "Failure",
        "message": f"command terminated with non-zero exit code: command terminated with exit code {code}",
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
    }


def exec_session(
    run: PodRun, container: Container, raw_query: str, headers: dict[str, str]
) -> Callable[[BaseHTTPRequestHandler], None]:
    """Check the request (400s as the API gives them), then the session that serves the upgrade."""
    params = urllib.parse.parse_qs(raw_query, keep_blank_values=True)
    argv = params.get("command") or []
    if not argv:
        raise StatusError(400, "BadRequest", "you must specify at least 1 command")
    if not container.running:
        raise StatusError(
            400, "BadRequest", f'container "{container.name}" in pod "{run.name}" is not running'
        )
    offered = [p.strip() for p in headers.get("sec-websocket-protocol", "").split(",")]
    protocol = next((p for p in offered if p in PROTOCOLS), None)
    if headers.get("upgrade", "").lower() != "websocket" or protocol is None:
        raise StatusError(
            400, "BadRequest", "Upgrade request required: websocket with v4.channel.k8s.io or v5"
        )
    use_stdin, tty = _flag(params, "stdin"), _flag(params, "tty")
    use_stdout, use_stderr = _flag(params, "stdout"), _flag(params, "stderr") and not tty
    workdir = str(container.spec.get("workingDir") or run.sandbox.home)

    def serve(handler: BaseHTTPRequestHandler) -> None:
        handler.close_connection = True
        handler.send_response(101, "Switching Protocols")
        handler.send_header("Upgrade", "websocket")
        handler.send_header("Connection", "Upgrade")
        handler.send_header("Sec-WebSocket-Accept", accept_key(headers.get("sec-websocket-key", "")))
        handler.send_header("Sec-WebSocket-Protocol", protocol)
        handler.end_headers()
        handler.wfile.flush()
        socket = WebSocket(handler.rfile, handler.wfile)  # type: ignore[arg-type]
        pipe = subprocess.PIPE
        terminal = pty.openpty() if tty else None
        if terminal is not None:
            proc = run.sandbox.spawn(argv, container.env, workdir, terminal[1], terminal[1], terminal[1])
            os.close(terminal[1])
            sources: list[tuple[int, IO[bytes] | int]] = [(STDOUT, terminal[0])]
        else:
            proc = run.sandbox.spawn(
                argv,
                container.env,
                workdir,
                pipe if use_stdin else subprocess.DEVNULL,
                pipe if use_stdout else subprocess.DEVNULL,
                pipe if use_stderr else subprocess.DEVNULL,
            )
            sources = [(ch, s) for ch, s in ((STDOUT, proc.stdout), (STDERR, proc.stderr)) if s is not None]

        def pump(channel: int, source: IO[bytes] | int) -> None:
            while True:
                try:
                    data = os.read(source if isinstance(source, int) else source.fileno(), 65536)
                except OSError:  # a pty's reader gets EIO once the terminal closes
                    data = b""
                if not data:
                    return
                socket.send(BINARY, bytes([channel]) + data)

        pumps = [threading.Thread(target=pump, args=source, daemon=True) for source in sources]
        for thread in pumps:
            thread.start()

        def feed() -> None:
            sink: int | None = terminal[0] if terminal else proc.stdin.fileno() if proc.stdin else None
            while (message := socket.receive()) is not None:
                channel, data = message[0] if message else -1, message[1:]
                try:
                    if channel == STDIN and sink is not None and data:
                        os.write(sink, data)
                    elif (
                        channel == CLOSE and protocol.startswith("v5") and data[:1] == b"\x00" and proc.stdin
                    ):
                        proc.stdin.close()
                        sink = None
                except OSError:
                    sink = None
            if proc.stdin and not proc.stdin.closed:
                proc.stdin.close()

        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        code = proc.wait()
        for thread in pumps:
            thread.join()
        if terminal is not None:
            os.close(terminal[0])
        code = code if code >= 0 else 128 - code
        socket.send(BINARY, bytes([ERROR]) + json.dumps(_result(code)).encode())
        socket.close()
        # The closing handshake (RFC 6455 7.1.1): the client answers our close frame with its own,
        # and only then does the connection go; closing first made the client's answer fail with
        # "socket is already closed" (seen in CI under load).
        feeder.join(timeout=10)

    return serve
