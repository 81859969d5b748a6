"""The MIP placement agrees with brute force, and chains move data cheaply."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from skyhop.optimizer import optimize_dag
from skyhop.optimizer.dag_solver import Choice, Flow, brute_force, place, total
from skyhop.spec import Dag, DagTask, Task, task_from_dict
from tests.optimizer.catalogs import catalog_set

PLACES = [
    ("aws", "us-east-1"),
    ("aws", "eu-west-1"),
    ("gcp", "us-central1"),
    ("gcp", "europe-west4"),
    ("azure", "eastus"),
]


def _random_dag(rng: random.Random, minimize_time: bool) -> tuple[list[list[Choice]], list[Flow]]:
    n = rng.randint(2, 4)
    choices = []
    for _ in range(n):
        places = rng.sample(PLACES, rng.randint(1, len(PLACES)))
        choices.append(
            [
                Choice(
                    p,
                    r,
                    (round(rng.uniform(0, 10), 3), round(rng.uniform(0, 5), 3) if minimize_time else 0.0),
                )
                for p, r in places
            ]
        )
    edges = [(i, i + 1) for i in range(n - 1)]
    if n > 2 and rng.random() < 0.5:
        edges.append((0, n - 1))  # not only chains
    flows = []
    for u, v in edges:
        cloud = {
            p: (round(rng.uniform(2, 8), 3), round(rng.uniform(0, 2), 3)) for p in ("aws", "gcp", "azure")
        }
        region = {
            p: (round(c[0] * rng.uniform(0, 0.5), 3), round(c[1] * rng.uniform(0, 0.5), 3))
            for p, c in cloud.items()
        }
        flows.append(Flow(u, v, leave_cloud=cloud, leave_region=region))
    return choices, flows


@pytest.mark.parametrize("seed", range(40))
def test_solver_matches_brute_force(seed: int) -> None:
    rng = random.Random(seed)
    choices, flows = _random_dag(rng, minimize_time=seed % 2 == 1)
    picks = place(choices, flows)
    assert total(choices, flows, picks) == pytest.approx(brute_force(choices, flows), abs=1e-5)


def test_solver_is_repeatable() -> None:
    choices = [[Choice("aws", "a", (1.0, 0.0)), Choice("gcp", "b", (1.0, 0.0))]] * 3
    flows = [Flow(0, 1), Flow(1, 2)]
    assert len({tuple(place(choices, flows)) for _ in range(5)}) == 1


def _task(resources: dict[str, object], name: str) -> Task:
    return task_from_dict({"name": name, "resources": resources}, Path("."))


def test_a_chain_with_big_outputs_stays_in_one_region(tmp_path: Path) -> None:
    prep = DagTask(task=_task({"cpus": 8}, "prep"), outputs_gb=2000)
    train = DagTask(task=_task({"accelerators": "V100"}, "train"))
    alone = optimize_dag(
        Dag.chain([prep.model_copy(update={"outputs_gb": 0.0}), train]), catalog_set(tmp_path)
    )
    assert [p.chosen.provider for p in alone.plans] == ["aws", "gcp"]  # each task's cheapest
    joint = optimize_dag(Dag.chain([prep, train]), catalog_set(tmp_path))
    assert {(p.chosen.provider, p.chosen.region) for p in joint.plans} == {("gcp", "us-central1")}
    assert joint.egress_cost == 0.0
    assert joint.total_cost < alone.total_cost + 2000 * 0.09


def test_chain_yaml_loads_header_outputs_and_runtime(tmp_path: Path) -> None:
    from skyhop.spec import SpecError, load_dag

    path = tmp_path / "chain.yaml"
    path.write_text(
        "name: pipe\n---\nname: a\nresources: {cpus: 8}\noutputs: {/data: 10}\nestimated_runtime: 2\n"
        "---\nname: b\nresources: {accelerators: T4}\nestimated_runtime: {T4: 3, default: 9}\n"
    )
    dag = load_dag(str(path))
    assert (dag.name, [n.task.name for n in dag.tasks], dag.edges) == ("pipe", ["a", "b"], [(0, 1)])
    assert dag.tasks[0].outputs_gb == 10 and dag.tasks[1].hours_on({"T4": 1}) == 3
    assert dag.tasks[1].hours_on({}) == 9
    path.write_text("name: x\n---\nresources: {cpus: 4}\n---\nresources: {cpus: four}\n")
    with pytest.raises(SpecError, match=r"^resources.cpus: task 2: cpus must be a positive number"):
        load_dag(str(path))
    path.write_text("resources: {cpus: 4}\noutputs: {/data: lots}\n")
    with pytest.raises(SpecError, match=r"^outputs: outputs must map paths to sizes in GB"):
        load_dag(str(path))
