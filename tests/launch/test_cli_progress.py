"""The CLI prints each failed attempt once, also when a continue-as-new drops the oldest from the
launch's ``progress`` (its handle has no run id, so it queries whichever run is current)."""

from __future__ import annotations

import pytest

from skyhop.cli.launching import _FailoverPrinter
from skyhop.cli.output import Ticker
from skyhop.contract.clusters import FailoverAttempt, LaunchProgress


def _attempt(zone: str, next_zone: str | None) -> FailoverAttempt:
    return FailoverAttempt(
        provider="aws",
        region="us-east-1",
        zone=zone,
        instance_type="m6i.large",
        kind="capacity",
        code="InsufficientInstanceCapacity",
        message="full",
        blocked="zone",
        next_location=f"aws/us-east-1/{next_zone}" if next_zone else None,
    )


def test_attempts_are_printed_once_across_a_continue_as_new(capsys: pytest.CaptureFixture[str]) -> None:
    printer, ticker = _FailoverPrinter(), Ticker(False)
    a, b, c = (
        _attempt("us-east-1a", "us-east-1b"),
        _attempt("us-east-1b", "us-east-1c"),
        _attempt("us-east-1c", "us-east-1a"),
    )
    printer.show(LaunchProgress(stage="provision", stage_started_at=0, attempts=[a, b]), False, ticker)
    # The next run lists only the most recent attempt, and counts the two before it.
    later = LaunchProgress(stage="provision", stage_started_at=0, attempts=[b, c], earlier_attempts=1)
    printer.show(later, False, ticker)
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(":")[0].strip() for line in lines] == [
        "✗ aws us-east-1a",
        "✗ aws us-east-1b",
        "✗ aws us-east-1c",
    ]
