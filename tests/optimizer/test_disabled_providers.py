"""A provider ``skyhop check`` disabled is never a candidate, whatever its catalog offers; when only
disabled providers offer a request, the error says so, why, and how to enable one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from skyhop.optimizer import Blocked, Blocklist, NoFeasibleOfferingError, optimize
from skyhop.providers.base import CheckResult
from skyhop.providers.registry import write_checks
from skyhop.spec import Resources, Task
from tests.optimizer.catalogs import catalog_set

NO_CREDENTIALS = {
    "aws": CheckResult(enabled=False, reason="no AWS credentials found", hint="run 'aws configure'"),
    "gcp": CheckResult(enabled=False, reason="no application default credentials", hint="run 'gcloud auth'"),
    "azure": CheckResult(enabled=False, reason="not logged in", hint="run 'az login'"),
    "local": CheckResult(enabled=True, reason="this machine"),
}


@pytest.fixture
def checks() -> Iterator[None]:
    """Verdicts of a ``skyhop check`` on a machine without cloud credentials."""
    write_checks(NO_CREDENTIALS)
    yield
    write_checks({})


def _error(task: Task, tmp_path: Path, blocklist: Blocklist | None = None) -> str:
    with pytest.raises(NoFeasibleOfferingError) as caught:
        optimize(task, catalog_set(tmp_path), blocklist=blocklist)
    return str(caught.value)


def test_a_disabled_cloud_is_skipped_and_an_enabled_one_chosen(tmp_path: Path) -> None:
    task = Task(run="x", resources=Resources(cpus="8"))
    assert optimize(task, catalog_set(tmp_path)).chosen.provider == "aws"
    write_checks({"aws": CheckResult(enabled=False, reason="no credentials")})
    try:
        plan = optimize(task, catalog_set(tmp_path))
        assert plan.chosen.provider != "aws"
        assert all(o.provider != "aws" for o in plan.candidates)
    finally:
        write_checks({})


@pytest.mark.usefixtures("checks")
def test_a_gpu_only_disabled_clouds_offer_names_them_why_and_how_to_enable_one(tmp_path: Path) -> None:
    message = _error(Task(run="x", resources=Resources(accelerators="T4:1")), tmp_path)
    assert message.startswith("T4:1 is offered only on aws, azure, gcp, and 'skyhop check' found they are")
    for result in NO_CREDENTIALS.values():
        if not result.enabled:
            assert result.reason in message and result.hint in message
    assert "then run 'skyhop check' again" in message
    assert "blocked by failover" not in message


@pytest.mark.usefixtures("checks")
def test_a_pinned_disabled_cloud_says_it_is_disabled(tmp_path: Path) -> None:
    message = _error(Task(run="x", resources=Resources(infra="aws")), tmp_path)
    assert message.startswith(
        "any on aws is offered only on aws, and 'skyhop check' found it is disabled: "
        "aws (no AWS credentials found; run 'aws configure')"
    )
    assert "blocked by failover" not in message


def test_a_blocklist_that_covers_every_enabled_candidate_still_says_so(tmp_path: Path) -> None:
    blocklist = Blocklist(entries=[Blocked(provider="aws")])
    message = _error(Task(run="x", resources=Resources(infra="aws")), tmp_path, blocklist)
    assert "every candidate for any on aws is blocked by failover (1 entries)" in message


@pytest.mark.usefixtures("checks")
def test_alternatives_only_disabled_clouds_offer_share_one_sentence(tmp_path: Path) -> None:
    message = _error(Task(run="x", resources=Resources(accelerators={"T4": 1, "V100": 1})), tmp_path)
    assert message.startswith("T4:1 or V100:1 is offered only on aws, azure, gcp, and 'skyhop check'")
    assert message.count("run 'aws configure'") == 1
