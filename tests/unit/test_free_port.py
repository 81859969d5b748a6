"""The embedded server's ports never collide with one given to a server that has not bound it yet."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from skyhop.cli import embedded


def test_a_port_already_given_out_is_never_chosen_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The dev server binds its UI port after its gRPC port; a CI run once saw the codec server get
    the UI's port in between (address already in use). The kernel's answers are scripted here."""
    answers = iter([34227, 34227, 40001])

    class Scripted(socket.socket):
        def getsockname(self) -> Any:
            return ("127.0.0.1", next(answers))

    monkeypatch.setattr(embedded.socket, "socket", Scripted)
    assert embedded.free_port(34227, 17233) == 40001
