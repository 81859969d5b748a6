"""The optimizer leaves out providers that cannot serve the task, and says why."""

from __future__ import annotations

from pathlib import Path

import pytest

from skyhop.cli.planning import placeable
from skyhop.optimizer import NoFeasibleOfferingError, optimize
from skyhop.optimizer.capabilities import left_out
from skyhop.spec import Resources, SpecError, Task
from skyhop.spec.limits import MAX_FOLDER_NODES
from tests.providers.sim_support import enabled_sim


def _task(resources: dict[str, object], **fields: object) -> Task:
    return Task.model_validate({"run": "x", "resources": resources, **fields})


def test_a_task_needing_ports_is_never_planned_on_local(tmp_path: Path) -> None:
    task = _task({"any_of": [{"infra": "local"}, {"infra": "sim"}], "ports": ["8080"]})
    with enabled_sim(tmp_path):
        plan = optimize(task)
        assert plan.chosen.provider == "sim"
        assert {o.provider for o in plan.candidates} == {"sim"}
        assert left_out(task, ["local", "sim", "aws"]) == {"local": "local does not support opening ports"}


def test_more_nodes_than_a_folder_provider_holds_go_to_a_cloud(tmp_path: Path) -> None:
    task = _task({"cpus": 2}, num_nodes=MAX_FOLDER_NODES + 1)
    with enabled_sim(tmp_path):
        plan = optimize(task)
    assert plan.chosen.provider not in ("local", "sim")
    assert not {o.provider for o in plan.candidates} & {"local", "sim"}


def test_a_pinned_provider_that_cannot_serve_says_why(tmp_path: Path) -> None:
    task = Task(run="x", resources=Resources(infra="local", ports=["8080"]))
    with pytest.raises(NoFeasibleOfferingError, match="local does not support opening ports"):
        optimize(task)
    with pytest.raises(SpecError, match=r"^resources.ports: local does not support opening ports"):
        placeable(task)


def test_an_absolute_mount_leaves_out_folder_providers(tmp_path: Path) -> None:
    task = _task({"infra": "local"}, file_mounts={"/etc/x": str(tmp_path)})
    with pytest.raises(NoFeasibleOfferingError, match="'/etc/x' is absolute"):
        optimize(task)
    with pytest.raises(SpecError, match=r"^file_mounts: local does not support absolute"):
        placeable(task)


def test_a_disk_size_is_not_silently_dropped_on_local(tmp_path: Path) -> None:
    task = _task({"any_of": [{"infra": "local"}, {"infra": "aws"}], "cpus": "2+", "disk_size": 100})
    plan = optimize(task)
    assert plan.chosen.provider == "aws" and "local" not in {o.provider for o in plan.candidates}
    assert left_out(task, ["local", "aws"]) == {"local": "local does not support setting the disk size"}


def test_the_best_disk_tier_is_served_anywhere_a_named_one_only_where_offered() -> None:
    """SkyPilot's ``disk_tier: best`` asks for the fastest disk a provider has, so a Kubernetes
    example with it plans there; ``ultra`` is a tier local does not have."""
    best = _task({"infra": "local", "disk_tier": "best"})
    assert optimize(best).chosen.provider == "local"
    placeable(best)
    ultra = _task({"any_of": [{"infra": "local"}, {"infra": "aws"}], "disk_tier": "ultra"})
    assert optimize(ultra).chosen.provider == "aws"
    assert left_out(ultra, ["local", "aws"]) == {"local": "local does not support disk tier ultra"}
