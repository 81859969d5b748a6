"""Hostile and oversized input through the real CLI: one line, exit 2, fast, nothing started.

The CLI is pointed at a Temporal address where nothing listens: a command that got as far as
connecting would exit 1 instead of 2, and a cluster folder would show that a node was made.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import skyhop
from tests.helpers import free_port

pytestmark = pytest.mark.timeout(120)

_CPU_BOUND_S = 5.0
"""CPU seconds the CLI may spend on hostile input: a parse that blows up (aliases, nesting, size)
burns CPU, and CPU time does not grow with the machine's load as wall time does (the suite runs in
parallel processes on 2 cores: a 5 s wall bound failed on interpreter start-up alone)."""
_WALL_BOUND_S = 30.0
"""What a wait without CPU (a connection retried, a read that blocks) must stay under: the point is
that nothing hangs for 40 s."""


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@pytest.fixture
def offline_env(tmp_path: Path) -> dict[str, str]:
    """A CLI environment whose Temporal address refuses connections, with a home of its own."""
    home = tmp_path / "home"
    home.mkdir()
    return {
        **os.environ,
        "HOME": str(home),
        "SKYHOP_HOME": str(home / ".skyhop"),
        "SKYHOP_TEMPORAL_ADDRESS": f"127.0.0.1:{free_port()}",
    }


def _refused(env: dict[str, str], *args: str, cwd: Path) -> str:
    """Run ``skyhop ARGS`` and check it refused the input the way bad input must be refused."""
    started, cpu_before = time.monotonic(), _children_cpu_s()
    result = skyhop(*args, env=env, cwd=cwd, timeout=60)
    elapsed, cpu = time.monotonic() - started, _children_cpu_s() - cpu_before
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr[-2000:]
    assert len(lines[0]) < 400, lines[0]
    assert cpu < _CPU_BOUND_S, f"took {cpu:.1f} s of CPU"
    assert elapsed < _WALL_BOUND_S, f"took {elapsed:.1f}s"
    assert not (Path(env["SKYHOP_HOME"]) / "clusters").exists()
    return lines[0]


def _both(env: dict[str, str], path: Path, *extra: str) -> str:
    """Refused by ``launch --dryrun`` and by ``launch`` alike; the launch's line is returned."""
    _refused(env, "launch", "--dryrun", str(path), *extra, cwd=path.parent)
    return _refused(env, "launch", "-y", "-c", "hostile", str(path), *extra, cwd=path.parent)


def _billion_laughs() -> str:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 9):
        prev, name = chr(ord("a") + i - 1), chr(ord("a") + i)
        lines.append(f"{name}: &{name} [{', '.join(['*' + prev] * 9)}]")
    lines.append("num_nodes: *i")
    return "\n".join(lines) + "\nrun: echo hi\n"


_FILES: dict[str, tuple[Callable[[], bytes], str]] = {
    "billion_laughs": (lambda: _billion_laughs().encode(), "aliases"),
    "self_alias": (lambda: b"envs: &a {X: *a}\nrun: echo\n", "alias"),
    "deep_nesting": (lambda: b"run: echo\nenvs:\n  X: " + b"[" * 5000 + b"]" * 5000 + b"\n", "nest"),
    "deep_block_nesting": (
        lambda: b"run: echo\nenvs:\n" + b"".join(b" " * (2 * i + 2) + b"k:\n" for i in range(300)),
        "nest",
    ),
    "binary": (lambda: bytes(range(256)) * 8, "UTF-8"),
    "invalid_utf8": (lambda: b"run: echo \xff\xfe caf\xe9\n", "UTF-8"),
    "huge": (lambda: b"run: echo hi\n" + b"# padding padding padding\n" * 2_000_000, "MB"),
    "num_nodes_true": (lambda: b"run: echo\nnum_nodes: true\n", "num_nodes"),
    "use_spot_int": (lambda: b"run: echo\nresources: {use_spot: 1}\n", "use_spot"),
    "disk_size_true": (lambda: b"run: echo\nresources: {disk_size: true}\n", "disk_size"),
    "autostop_down_int": (lambda: b"run: echo\nresources: {autostop: {down: 1}}\n", "down"),
    "too_many_nodes": (lambda: b"run: echo\nnum_nodes: 20000\n", "num_nodes"),
    "too_many_nodes_local": (lambda: b"run: echo\nnum_nodes: 200\nresources: {infra: local}\n", "local"),
    "too_many_envs": (
        lambda: b"run: echo\nenvs:\n" + b"".join(b"  K%d: v\n" % i for i in range(2000)),
        "envs",
    ),
    "env_too_big": (lambda: b"run: echo\nenvs: {BIG: " + b"x" * 300_000 + b"}\n", "envs"),
    "run_too_big": (lambda: b"run: echo " + b"x" * 300_000 + b"\n", "run"),
    "setup_too_big": (lambda: b"run: echo\nsetup: echo " + b"x" * 300_000 + b"\n", "setup"),
    "name_too_long": (lambda: b"run: echo\nname: " + b"n" * 5000 + b"\n", "name"),
    "too_many_alternatives": (
        lambda: (
            b"run: echo\nresources:\n  any_of:\n"
            + b"".join(b"    - {cpus: %d}\n" % (i + 1) for i in range(300))
        ),
        "any_of",
    ),
}


@pytest.mark.parametrize("case", sorted(_FILES))
def test_hostile_task_files_are_refused_quickly_in_one_line(
    case: str, offline_env: dict[str, str], tmp_path: Path
) -> None:
    make, expected = _FILES[case]
    path = tmp_path / f"{case}.yaml"
    path.write_bytes(make())
    line = _both(offline_env, path)
    assert expected in line, line


def test_too_many_file_mounts_are_refused(offline_env: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "data.txt").write_text("x")
    mounts = "".join(f"  ~/m{i}: data.txt\n" for i in range(600))
    path = tmp_path / "mounts.yaml"
    path.write_text(f"run: echo\nfile_mounts:\n{mounts}")
    assert "file_mounts" in _both(offline_env, path)


def test_a_request_too_large_for_temporal_is_refused_before_anything_starts(
    offline_env: dict[str, str], tmp_path: Path
) -> None:
    # Each field within its own bound, the whole request over Temporal's payload limit.
    (tmp_path / "data.txt").write_text("x")
    deep = "d/" * 1900
    mounts = "".join(f"  ? ~/{deep}m{i}\n  : data.txt\n" for i in range(200))  # long keys: explicit
    path = tmp_path / "big.yaml"
    path.write_text(f"run: echo hi\nfile_mounts:\n{mounts}")
    line = _refused(offline_env, "launch", "-y", "-c", "big", str(path), cwd=tmp_path)
    assert "request" in line and "KiB" in line, line


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["-c", "abc\n"], "cluster name"),
        (["-c", ""], "cluster name"),
        (["-c", "a" * 64], "cluster name"),
        (["--num-nodes", "5000"], "num_nodes"),
    ],
)
def test_hostile_flags_are_refused(
    flags: list[str], expected: str, offline_env: dict[str, str], tmp_path: Path
) -> None:
    line = _refused(offline_env, "launch", "-y", *flags, "echo hi", cwd=tmp_path)
    assert expected in line, line


def test_exec_refuses_a_cluster_name_with_a_trailing_newline(
    offline_env: dict[str, str], tmp_path: Path
) -> None:
    assert "cluster name" in _refused(offline_env, "exec", "abc\n", "echo hi", cwd=tmp_path)


def test_a_task_file_that_is_not_a_regular_file_is_refused(
    offline_env: dict[str, str], tmp_path: Path
) -> None:
    folder = tmp_path / "dir.yaml"
    folder.mkdir()
    assert "dir.yaml" in _refused(offline_env, "launch", "--dryrun", str(folder), cwd=tmp_path)
