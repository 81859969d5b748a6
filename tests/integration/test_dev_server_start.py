"""A dev server counts as started once it says so, not once its port listens: a port chosen free can
be taken by another program before the server binds it, and then it listens while the server exits."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from skyhop.cli.embedded import ServerError, dev_server_argv, free_port, start_dev_server
from tests.helpers import DevServer


def test_a_dev_server_whose_port_another_program_holds_is_an_error_not_a_start(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as holder:
        taken = holder.getsockname()[1]
        ui_port = free_port(taken)
        http_port = free_port(taken, ui_port)
        argv = dev_server_argv(
            port=taken,
            ui_port=ui_port,
            http_port=http_port,
            metrics_port=free_port(taken, ui_port, http_port),
            db_file=tmp_path / "temporal.db",
        )
        with pytest.raises(ServerError, match="exited at start: .*address already in use"):
            start_dev_server(argv, tmp_path / "temporal.log")


def test_the_test_sessions_server_starts_again_on_new_ports_when_its_port_was_taken(tmp_path: Path) -> None:
    server = DevServer(tmp_path)
    with socket.create_server(("127.0.0.1", server.port)) as taker:
        server.start()
        try:
            assert server.proc is not None and server.proc.poll() is None
            assert server.port != taker.getsockname()[1]
            with socket.create_connection(("127.0.0.1", server.port), timeout=10):
                pass
        finally:
            server.stop()


def test_a_server_that_panics_after_its_bind_error_is_named_by_the_bind_error(tmp_path: Path) -> None:
    """The bind can fail after the server's own check that its port is free: it then logs the error
    and panics, and the stack, not the error, ends its output."""
    said = (
        'echo \'level=ERROR msg="Failed to start gRPC listener" error="listen tcp 127.0.0.1:1: bind: '
        "address already in use\"'; echo 'panic: runtime error: invalid memory address'; "
        'for frame in $(seq 40); do echo "goroutine frame $frame"; done; exit 2'
    )
    with pytest.raises(ServerError, match='exited at start: level=ERROR .*address already in use"$'):
        start_dev_server(["sh", "-c", said], tmp_path / "temporal.log")
