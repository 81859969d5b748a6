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


def _failing_once(tries: Path, port: int) -> str:
    """A server that fails its first start on ``port`` (bind: address already in use), then starts."""
    bind_error = f'level=ERROR error="listen tcp 127.0.0.1:{port}: bind: address already in use"'
    return (
        f"echo start >> {tries}; if [ $(wc -l < {tries}) -lt 2 ]; then echo '{bind_error}'; exit 2; fi; "
        "echo 'Temporal Server: started'; exec sleep 60"
    )


def test_a_server_whose_own_service_port_was_taken_is_started_again(tmp_path: Path) -> None:
    """The server picks its services' ports itself, anew at each start: one taken is a race to retry."""
    tries = tmp_path / "tries"
    proc = start_dev_server(["sh", "-c", _failing_once(tries, 40035)], tmp_path / "temporal.log")
    try:
        assert tries.read_text().splitlines() == ["start", "start"]
    finally:
        proc.kill()
        proc.wait()


def test_a_server_whose_given_port_was_taken_is_not_started_again(tmp_path: Path) -> None:
    """A port of its command line taken: starting again on the same one is no remedy."""
    tries = tmp_path / "tries"
    argv = ["sh", "-c", _failing_once(tries, 40035), "sh", "--port", "40035"]
    with pytest.raises(ServerError, match="127.0.0.1:40035: bind: address already in use"):
        start_dev_server(argv, tmp_path / "temporal.log")
    assert tries.read_text().splitlines() == ["start"]
