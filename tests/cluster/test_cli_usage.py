"""Usage errors of the queue and lifecycle commands: one line, exit 2, nothing contacted."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from skyhop.cli.app import app


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["cancel", "dev"], "name the jobs to cancel, or pass --all"),
        (["cancel", "dev", "3", "--all"], "give job ids or --all, not both"),
        (["stop", "-y"], "name a cluster, or pass --all"),
        (["start", "dev", "--all", "-y"], "give cluster names or --all, not both"),
        (["start", "dev", "--down", "-y"], "--down needs --idle-minutes/-i"),
        (["autostop", "dev", "--cancel", "--down"], "--cancel takes no --idle-minutes or --down"),
    ],
)
def test_bad_usage_is_one_line_and_exit_2(argv: list[str], message: str) -> None:
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 2
    assert result.output.strip() == f"Error: {message}"


def test_negative_numbers_are_refused_by_the_option_types() -> None:
    assert CliRunner().invoke(app, ["autostop", "dev", "-i", "-1"]).exit_code == 2
    assert CliRunner().invoke(app, ["logs", "dev", "--tail", "-3"]).exit_code == 2
