"""``placement: SAME_INFRA``: a job group's tasks planned on one provider and region, and pinned there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from skyhop.cli.planning import placed_together
from skyhop.contract.managed_jobs import ManagedJobRequest
from skyhop.optimizer import NoFeasibleOfferingError, optimize_dag
from skyhop.spec import Dag, DagTask, Execution, JobGroup, Placement, task_from_dict
from tests.optimizer.catalogs import catalog_set

SAME_INFRA = JobGroup(placement=Placement.SAME_INFRA, name="g")


def _group(*resources: dict[str, Any], group: JobGroup | None = SAME_INFRA) -> Dag:
    tasks = [task_from_dict({"name": f"t{i}", "resources": r}, Path(".")) for i, r in enumerate(resources)]
    return Dag(tasks=[DagTask(task=t) for t in tasks], execution=Execution.PARALLEL, group=group)


def _places(dag: Dag, tmp_path: Path) -> list[tuple[str, str | None]]:
    return [(p.chosen.provider, p.chosen.region) for p in optimize_dag(dag, catalog_set(tmp_path)).plans]


def test_same_infra_puts_every_task_in_the_one_region_cheapest_for_them_all(tmp_path: Path) -> None:
    tasks = ({"cpus": 8}, {"accelerators": "V100"})
    assert _places(_group(*tasks, group=None), tmp_path) == [("aws", "us-east-1"), ("gcp", "us-central1")]
    assert _places(_group(*tasks), tmp_path) == [("gcp", "us-central1"), ("gcp", "us-central1")]


def test_same_infra_with_no_common_region_says_where_each_task_could_go(tmp_path: Path) -> None:
    with pytest.raises(NoFeasibleOfferingError) as info:
        optimize_dag(_group({"infra": "aws", "cpus": 8}, {"accelerators": "V100"}), catalog_set(tmp_path))
    assert str(info.value) == (
        "placement SAME_INFRA: no provider and region offers every task of the group "
        "(t0: aws/us-east-1; t1: azure/eastus, gcp/europe-west4, gcp/us-central1)"
    )


def test_a_placed_group_is_pinned_where_the_plan_put_it(tmp_path: Path) -> None:
    dag = _group({"cpus": 8}, {"any_of": [{"accelerators": "V100"}, {"accelerators": "H100:8"}]})
    placed = placed_together(dag, optimize_dag(dag, catalog_set(tmp_path)))
    for node in placed.tasks:
        assert {(alt.cloud, alt.region) for alt in node.task.resources.alternatives} == {
            ("gcp", "us-central1")
        }
    request = ManagedJobRequest(
        job_id=1, name="g", tasks=[n.task for n in placed.tasks], parallel=True, group=SAME_INFRA
    )
    assert request.group == SAME_INFRA
    # A client that does not pin the tasks is refused: the workflow places each task on its own.
    with pytest.raises(ValidationError, match="placement SAME_INFRA: every task must be pinned"):
        ManagedJobRequest(
            job_id=1, name="g", tasks=[n.task for n in dag.tasks], parallel=True, group=SAME_INFRA
        )
