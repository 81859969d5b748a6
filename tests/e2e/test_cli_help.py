"""Every command's ``--help`` renders: the whole command tree in-process, the root as a user runs it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from skyhop.cli.app import app
from tests.conftest import skyhop
from tests.helpers import cli_imports, embedded_env


def _command_paths(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """The path of ``command`` and of every command under it (a group has ``commands``)."""
    yield path
    for name, sub in getattr(command, "commands", {}).items():
        yield from _command_paths(sub, (*path, name))


PATHS = list(_command_paths(typer.main.get_command(app)))


def test_the_tree_has_every_command_and_subcommand() -> None:
    assert {("launch",), ("exec",), ("server", "status"), ("ssh", "up"), ("catalog", "update")} <= set(PATHS)
    assert {("jobs", "launch"), ("jobs", "queue"), ("jobs", "logs"), ("jobs", "cancel")} <= set(PATHS)
    serve = {("serve", name) for name in ("up", "status", "update", "logs", "down")}
    assert serve <= set(PATHS)


def test_the_tree_is_every_registered_command() -> None:
    """The walk reaches every command and group Typer registers, so none escapes the render test."""
    registered = {
        c.name or c.callback.__name__.replace("_", "-") for c in app.registered_commands if c.callback
    }
    groups = {g.name for g in app.registered_groups if g.name}
    assert registered | groups == {path[0] for path in PATHS if path}


@pytest.mark.parametrize("flag", ["--help", "-h"])
@pytest.mark.parametrize("path", PATHS, ids=lambda path: " ".join(path) or "skyhop")
def test_help_renders(path: tuple[str, ...], flag: str) -> None:
    result = CliRunner().invoke(app, [*path, flag])
    assert result.exit_code == 0, result.output
    assert result.exception is None
    assert result.stdout.startswith("Usage: skyhop")


@pytest.mark.parametrize("argv", [["--help"], ["launch", "--help"], ["-h"]])
def test_help_renders_in_a_subprocess(argv: list[str], tmp_path_factory: pytest.TempPathFactory) -> None:
    result = skyhop(*argv, env=embedded_env(tmp_path_factory.mktemp("help")), timeout=60)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr and result.stdout.startswith("Usage: skyhop")
    if argv[0] == "launch":
        assert "cloud[/region[/zone]]" in result.stdout


@pytest.mark.parametrize("argv", [["--help"], ["jobs", "queue", "--help"], ["launch", "--help"]])
def test_help_imports_neither_temporal_nor_the_contract(argv: list[str]) -> None:
    """A command imports what it needs when it runs: ``--help`` loads neither the Temporal SDK nor
    skyhop's contract and task spec, which pull in the providers' models (a fifth of a second)."""
    heavy = ("temporalio", "skyhop.contract", "skyhop.spec", "skyhop.activities", "skyhop.workflows")
    loaded = sorted(m for m in cli_imports(*argv) if m.startswith(heavy))
    assert not loaded, f"skyhop {' '.join(argv)} imported {loaded[:5]}"
