"""``Patience`` asks again a call the client gave up waiting for, saying so once per command."""

from __future__ import annotations

import pytest
from temporalio.service import RPCError, RPCStatusCode

from skyhop.cli.failures import Patience
from tests.conftest import run


def _sender(errors: list[Exception]) -> tuple[list[int], object]:
    calls: list[int] = []

    async def send() -> str:
        calls.append(1)
        if errors:
            raise errors.pop(0)
        return "answered"

    return calls, send


def _timed_out() -> RPCError:
    return RPCError("Timeout expired", RPCStatusCode.CANCELLED, b"")


def test_calls_that_time_out_are_sent_again_and_the_wait_is_said_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    patience = Patience("Temporal answers late; waiting ...", pause_s=0.01)
    first_calls, first = _sender([_timed_out(), _timed_out()])
    second_calls, second = _sender([RPCError("deadline", RPCStatusCode.DEADLINE_EXCEEDED, b"")])
    assert run(patience.send(first)) == "answered"  # type: ignore[arg-type]
    assert run(patience.send(second)) == "answered"  # type: ignore[arg-type]
    assert (len(first_calls), len(second_calls)) == (3, 2)
    assert capsys.readouterr().err.count("Temporal answers late; waiting ...") == 1


def test_any_other_refusal_is_raised_at_once() -> None:
    calls, send = _sender([RPCError("no such workflow", RPCStatusCode.NOT_FOUND, b"")])
    with pytest.raises(RPCError, match="no such workflow"):
        run(Patience("waiting", pause_s=0.01).send(send))  # type: ignore[arg-type]
    assert len(calls) == 1
