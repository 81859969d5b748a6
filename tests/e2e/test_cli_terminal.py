"""What a user sees on a terminal: stderr is a pty, rendered the way a terminal draws it."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import threading

import pytest

from skyhop.cli.output import Ticker
from tests.conftest import REPO, skyhop
from tests.helpers import SKYHOP_CLI

pytestmark = pytest.mark.e2e


def _on_a_terminal(argv: list[str], env: dict[str, str]) -> tuple[int, str, bytes]:
    """Run the CLI with stderr on a pty: exit code, stdout, and every byte written to the terminal."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [SKYHOP_CLI, *argv], env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=slave, text=True
    )
    os.close(slave)
    chunks: list[bytes] = []

    def read() -> None:
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: every writer has closed the terminal
                return
            if not chunk:
                return
            chunks.append(chunk)

    reader = threading.Thread(target=read)
    reader.start()
    out, _ = proc.communicate(timeout=120)
    reader.join(30)
    os.close(master)
    return proc.returncode, out, b"".join(chunks)


def _rendered(stream: bytes) -> list[str]:
    """The lines left on the screen: a carriage return goes back to column 0, ESC[K erases the rest."""
    lines = []
    for raw in stream.decode().replace("\r\n", "\n").split("\n"):
        screen: list[str] = []
        column = 0
        for part in re.split(r"(\r|\x1b\[K)", raw):
            if part == "\r":
                column = 0
            elif part == "\x1b[K":
                del screen[column:]
            else:
                screen[column : column + len(part)] = list(part)
                column += len(part)
        lines.append("".join(screen))
    return lines


def test_launch_leaves_only_whole_lines_and_the_spinner_turns(user_env: dict[str, str]) -> None:
    code, out, stream = _on_a_terminal(["launch", "-y", "-c", "tty", "sleep 1; echo hello"], user_env)
    assert code == 0 and out == "hello\n", stream
    lines = _rendered(stream)
    assert "Job 1 submitted on cluster tty." in lines, lines
    leftovers = [line for line in lines if re.search(r"\d+\.\ds", line) and "(" not in line]
    assert not leftovers, lines  # no timer fragment before (or as) a line
    frames = {char for char in stream.decode() if char in Ticker.FRAMES}
    # Two frames show a turn; a quick launch on an idle machine may end before a third.
    assert len(frames) >= 2, "the spinner did not turn"


def test_a_foreground_exec_prints_its_job_id(user_env: dict[str, str]) -> None:
    skyhop("launch", "-y", "-c", "ids", "echo first", env=user_env)
    done = skyhop("exec", "ids", "echo second", env=user_env)
    assert done.returncode == 0 and done.stdout == "second\n"
    assert done.stderr.splitlines()[0] == "Job 2 submitted on cluster ids."
