"""A provider ``skyhop check`` disabled is never a candidate, whatever its catalog offers."""

from __future__ import annotations

from pathlib import Path

from optimizer import optimize
from providers.base import CheckResult
from providers.registry import write_checks
from spec import Resources, Task
from tests.optimizer.catalogs import catalog_set


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
