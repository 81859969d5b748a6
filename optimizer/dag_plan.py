"""Placing a DAG: each task's candidates, then the joint choice when data moves between tasks.

Without data to move, each task's best candidate is the joint optimum, and no solver runs. With
it, each task is reduced to its best candidate per (provider, region), since moving data costs
the same from any zone of a region, and ``dag_solver.place`` picks one per task. A job group
with ``placement: SAME_INFRA`` puts every task on one (provider, region): among those every task
has a candidate in, the one whose best candidates sum to the least.
"""

from __future__ import annotations

from pydantic import BaseModel

from skyhop.optimizer.blocklist import Blocklist
from skyhop.optimizer.dag_solver import Choice, Flow, Values, place
from skyhop.optimizer.egress import egress
from skyhop.optimizer.errors import NoFeasibleOfferingError
from skyhop.optimizer.plan import Candidate, Minimize, Plan, plan_for, task_candidates
from skyhop.providers.catalog import CatalogSet, load_catalogs
from skyhop.spec import Dag, Placement

__all__ = ["DagPlan", "optimize_dag"]


class DagPlan(BaseModel):
    """One plan per task, in the DAG's order, and what moving data between them costs."""

    name: str | None = None
    plans: list[Plan]
    minimize: Minimize = "cost"
    egress_cost: float = 0.0
    """$ to move every task's outputs to the tasks that follow it."""
    egress_hours: float = 0.0

    @property
    def hourly_cost(self) -> float:
        """$/hour of all tasks' nodes together."""
        return sum(plan.hourly_cost for plan in self.plans)

    @property
    def total_cost(self) -> float:
        """$ for every task's estimated runtime plus data movement."""
        return sum(p.hourly_cost * p.estimated_hours for p in self.plans) + self.egress_cost


def _values(candidate: Candidate, minimize: Minimize) -> Values:
    return (candidate.hours, candidate.cost) if minimize == "time" else (candidate.cost, 0.0)


def _moved(cost: float, hours: float, minimize: Minimize) -> Values:
    return (hours, cost) if minimize == "time" else (cost, 0.0)


def optimize_dag(
    dag: Dag,
    catalogs: CatalogSet | None = None,
    *,
    blocklist: Blocklist | None = None,
    minimize: Minimize = "cost",
) -> DagPlan:
    """The best joint placement; raises NoFeasibleOfferingError naming the first infeasible task."""
    catalogs = catalogs or load_catalogs()
    found = [task_candidates(node, catalogs, blocklist or Blocklist(), minimize) for node in dag.tasks]
    moving = [(u, v, dag.tasks[u].outputs_gb) for u, v in dag.edges if dag.tasks[u].outputs_gb > 0]
    if dag.group is not None and dag.group.placement == Placement.SAME_INFRA:
        chosen = _same_place(dag, found, minimize)
    elif not moving:
        chosen = [candidates[0] for candidates in found]
    else:
        groups = [_best_per_region(candidates) for candidates in found]
        choices = [
            [Choice(c.offering.provider, c.offering.region or "", _values(c, minimize)) for c in g]
            for g in groups
        ]
        flows = [_flow(u, v, gb, choices, minimize) for u, v, gb in moving]
        picks = place(choices, flows)
        chosen = [group[pick] for group, pick in zip(groups, picks, strict=True)]
    cost = hours = 0.0
    for u, v, gb in moving:
        a, b = chosen[u].offering, chosen[v].offering
        moved = egress(a.provider, a.region, b.provider, b.region, gb)
        cost, hours = cost + moved[0], hours + moved[1]
    return DagPlan(
        name=dag.name,
        plans=[plan_for(node, found[i], chosen[i], minimize) for i, node in enumerate(dag.tasks)],
        minimize=minimize,
        egress_cost=cost,
        egress_hours=hours,
    )


def _same_place(dag: Dag, found: list[list[Candidate]], minimize: Minimize) -> list[Candidate]:
    """Each task's best candidate in the one (provider, region) where they cost least together."""
    per_place = [{(c.offering.provider, c.offering.region): c for c in _best_per_region(f)} for f in found]
    common = set(per_place[0]).intersection(*per_place[1:])
    if not common:
        places = "; ".join(
            f"{node.task.name or f'task {i + 1}'}: {', '.join(_place_names(per_place[i]))}"
            for i, node in enumerate(dag.tasks)
        )
        raise NoFeasibleOfferingError(
            f"placement SAME_INFRA: no provider and region offers every task of the group ({places})"
        )

    def together(place: tuple[str, str | None]) -> tuple[Values, str, str]:
        values = [_values(places[place], minimize) for places in per_place]
        return (sum(v[0] for v in values), sum(v[1] for v in values)), place[0], place[1] or ""

    best = min(common, key=together)
    return [places[best] for places in per_place]


def _place_names(places: dict[tuple[str, str | None], Candidate], shown: int = 3) -> list[str]:
    names = sorted(f"{provider}/{region}" if region else provider for provider, region in places)
    return names[:shown] + ([f"{len(names) - shown} more"] if len(names) > shown else [])


def _best_per_region(candidates: list[Candidate]) -> list[Candidate]:
    best: dict[tuple[str, str | None], Candidate] = {}
    for candidate in candidates:  # best first, so the first per place is its best
        best.setdefault((candidate.offering.provider, candidate.offering.region), candidate)
    return list(best.values())


def _flow(u: int, v: int, gb: float, choices: list[list[Choice]], minimize: Minimize) -> Flow:
    """The edge's costs by source provider; leaving a cloud never costs less than changing region."""
    leave_cloud: dict[str, Values] = {}
    leave_region: dict[str, Values] = {}
    for provider in {c.provider for c in choices[u]}:
        region = _moved(*egress(provider, "a", provider, "b", gb), minimize)
        cloud = _moved(*egress(provider, "a", "", "b", gb), minimize)
        leave_region[provider] = region
        leave_cloud[provider] = (max(cloud[0], region[0]), max(cloud[1], region[1]))
    return Flow(u, v, leave_cloud=leave_cloud, leave_region=leave_region)
