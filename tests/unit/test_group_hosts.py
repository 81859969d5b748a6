"""``inter_connection``: the prelude that adds a job group's hostnames to a node's hosts file."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from skyhop.workflows.group_hosts import hosts_lines, with_hosts


def test_every_node_of_every_task_gets_skypilots_hostname() -> None:
    lines = hosts_lines("rl", [("trainer", ["10.0.0.1", "10.0.0.2"]), ("sglang", ["10.0.1.1"])])
    assert lines == ["10.0.0.1 trainer-0.rl", "10.0.0.2 trainer-1.rl", "10.0.1.1 sglang-0.rl"]


@pytest.mark.skipif(os.geteuid() != 0, reason="the prelude writes as root, or through sudo")
def test_the_prelude_adds_the_names_once_then_runs(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 localhost\n")
    script = with_hosts("echo ran", "rl", ["10.0.0.1 trainer-0.rl"], str(hosts))
    for _ in range(2):  # a restart on the same node adds nothing more
        done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True)
        assert done.stdout == "ran\n" and done.stderr == ""
    assert hosts.read_text() == "127.0.0.1 localhost\n# skyhop job group rl\n10.0.0.1 trainer-0.rl\n"


def test_a_node_that_cannot_write_the_file_says_so_and_runs(tmp_path: Path) -> None:
    script = with_hosts("echo ran", "rl", ["10.0.0.1 trainer-0.rl"], str(tmp_path / "missing" / "hosts"))
    done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 0 and done.stdout == "ran\n"
    assert f"skyhop: could not add the job group hostnames to {tmp_path}/missing/hosts" in done.stderr
