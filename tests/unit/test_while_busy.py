"""``while_busy`` sends an update again only where Temporal refused it for a reason that passes;
``Patience`` asks again a call the client gave up waiting for, saying so once per command."""

from __future__ import annotations

import pytest
from temporalio.client import WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from skyhop.cli import failures
from skyhop.cli.failures import Patience, while_busy
from tests.conftest import run


def _sender(errors: list[Exception]) -> tuple[list[int], object]:
    calls: list[int] = []

    async def send() -> str:
        calls.append(1)
        if errors:
            raise errors.pop(0)
        return "taken"

    return calls, send


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (RPCStatusCode.RESOURCE_EXHAUSTED, "too many outstanding updates"),
        (RPCStatusCode.UNAVAILABLE, "update was aborted"),
        (
            RPCStatusCode.FAILED_PRECONDITION,
            "Unable to perform workflow execution update due to unexpected workflow task failure.",
        ),
    ],
)
def test_a_refusal_that_passes_is_sent_again(status: RPCStatusCode, message: str) -> None:
    calls, send = _sender([RPCError(message, status, b"")])
    assert run(while_busy(send)) == "taken"  # type: ignore[arg-type]
    assert len(calls) == 2


def test_any_other_refusal_is_raised_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(failures, "_BUSY_RETRY_S", 60.0)
    calls, send = _sender([RPCError("no such workflow", RPCStatusCode.NOT_FOUND, b"")])
    with pytest.raises(RPCError):
        run(while_busy(send))  # type: ignore[arg-type]
    assert len(calls) == 1


def test_an_update_the_server_rejected_as_unprocessed_is_sent_again() -> None:
    """A restarted worker can complete a task without running the update in it (temporalio/sdk-python#848)."""
    unprocessed = WorkflowUpdateFailedError(
        ApplicationError("wasn't processed by worker", type="UnprocessedUpdate")
    )
    calls, send = _sender([unprocessed])
    assert run(while_busy(send)) == "taken"  # type: ignore[arg-type]
    assert len(calls) == 2


def test_an_update_the_workflow_refused_is_raised_at_once() -> None:
    refused = WorkflowUpdateFailedError(ApplicationError("cluster is stopping", type="ClusterBusy"))
    calls, send = _sender([refused])
    with pytest.raises(WorkflowUpdateFailedError):
        run(while_busy(send))  # type: ignore[arg-type]
    assert len(calls) == 1


def _timed_out() -> RPCError:
    return RPCError("Timeout expired", RPCStatusCode.CANCELLED, b"")


def test_calls_that_time_out_are_sent_again_and_the_wait_is_said_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    patience = Patience("Temporal answers late; waiting ...", pause_s=0.01)
    first_calls, first = _sender([_timed_out(), _timed_out()])
    second_calls, second = _sender([RPCError("deadline", RPCStatusCode.DEADLINE_EXCEEDED, b"")])
    assert run(patience.send(first)) == "taken"  # type: ignore[arg-type]
    assert run(patience.send(second)) == "taken"  # type: ignore[arg-type]
    assert (len(first_calls), len(second_calls)) == (3, 2)
    assert capsys.readouterr().err.count("Temporal answers late; waiting ...") == 1


def test_patience_raises_any_other_refusal_at_once() -> None:
    calls, send = _sender([RPCError("no such workflow", RPCStatusCode.NOT_FOUND, b"")])
    with pytest.raises(RPCError, match="no such workflow"):
        run(Patience("waiting", pause_s=0.01).send(send))  # type: ignore[arg-type]
    assert len(calls) == 1
