"""The layers import downwards only: workflows and activities never import the CLI."""

from __future__ import annotations

import ast
from pathlib import Path

from temporalio.exceptions import ActivityError, ApplicationError, RetryState

from skyhop.contract.failures import innermost_message

REPO = Path(__file__).resolve().parents[2]


def test_no_workflow_or_activity_imports_the_cli() -> None:
    offenders = []
    for top in ("workflows", "activities", "contract", "providers"):
        for path in (REPO / top).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                names = (
                    [node.module or ""]
                    if isinstance(node, ast.ImportFrom)
                    else [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else []
                )
                offenders += [f"{path.relative_to(REPO)}: {n}" for n in names if n.startswith("skyhop.cli")]
    # The one known exception, to remove: the SSH pools' Temporal client (``ssh up`` on the CLI and
    # provisioning on a worker both use it) borrows the CLI's connection and retry helpers.
    known = "providers/ssh/deployment.py: skyhop.cli."
    assert [o for o in offenders if not o.startswith(known)] == []


def test_a_failure_chain_reads_as_its_innermost_sentence() -> None:
    """A cluster's recorded error and the CLI's printed one are the same bare sentence, no type prefix."""
    cause = ApplicationError("the node is gone", type="NodeGone")
    chain = ActivityError(
        "activity failed",
        scheduled_event_id=1,
        started_event_id=2,
        identity="w",
        activity_type="start_job",
        activity_id="1",
        retry_state=RetryState.NON_RETRYABLE_FAILURE,
    )
    chain.__cause__ = cause
    assert innermost_message(chain) == "the node is gone"
    assert innermost_message(ValueError("plain")) == "plain"
