"""The commands ``examples/gpu.yaml`` suggests do what its comments say, before and after ``skyhop check``."""

from __future__ import annotations

import shlex
from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from skyhop.cli.app import app
from skyhop.providers.base import CheckResult
from skyhop.providers.registry import write_checks
from tests.conftest import REPO

EXAMPLE = REPO / "examples" / "gpu.yaml"


def _suggested() -> list[list[str]]:
    """The ``#   skyhop ...`` lines of the example's header, as argv."""
    lines = [line.removeprefix("#").strip() for line in EXAMPLE.read_text().splitlines()]
    return [shlex.split(line)[1:] for line in lines if line.startswith("skyhop ")]


@pytest.fixture
def no_cloud_credentials() -> Iterator[None]:
    write_checks(
        {name: CheckResult(enabled=False, reason="no credentials") for name in ("aws", "gcp", "azure")}
    )
    yield
    write_checks({})


def _invoke(argv: list[str]) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, argv, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_the_example_suggests_show_gpus_and_a_dryrun() -> None:
    assert [argv[0] for argv in _suggested()] == ["show-gpus", "show-gpus", "launch"]


def test_before_check_every_suggestion_prints_a_plan_or_prices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    for argv in _suggested():
        code, out, err = _invoke(argv)
        assert code == 0, (argv, err)
        assert "A100" in out


@pytest.mark.usefixtures("no_cloud_credentials")
def test_after_check_prices_still_show_and_the_dryrun_says_why_it_cannot_plan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(REPO)
    *prices, dryrun = _suggested()
    for argv in prices:
        code, out, err = _invoke(argv)
        assert code == 0 and "A100" in out, (argv, err)
    code, _, err = _invoke(dryrun)
    assert code == 1
    assert "is offered only on aws, azure, gcp, and 'skyhop check' found they are disabled" in err
    assert "then run 'skyhop check' again" in err
