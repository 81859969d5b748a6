"""Joint placement of a DAG's tasks with OR-Tools CP-SAT: node costs plus data-movement costs.

Each task picks one (provider, region) place; what moving data costs depends only on whether two
places share a region, a provider, or neither. So the pairwise cost linearises with two small sets
of indicators per edge instead of one variable per pair of places:

* ``same_cloud[p] <= onCloud(u, p)``, ``<= onCloud(v, p)``
* ``same_region[r] <= onRegion(u, r)``, ``<= onRegion(v, r)``, and per cloud sum(same_region) <= same_cloud
* edge cost = sum_p leave_cloud[p] * (onCloud(u, p) - same_cloud[p])
  + sum_p leave_region[p] * (same_cloud[p] - sum_{r in p} same_region[r])

Minimising pushes every indicator up to the product it stands for, so the model is exact. Two
objectives (time, then cost) are solved lexicographically. One worker and a fixed seed make the
choice among equal optima repeatable.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Choice", "Flow", "brute_force", "place", "total"]

_SCALE = 1_000_000
"""Objective values are scaled to integers (micro-dollars, micro-hours) for CP-SAT."""

Values = tuple[float, float]
"""(primary, secondary) objective values, e.g. (cost, 0) or (hours, cost)."""


@dataclass(frozen=True)
class Choice:
    """One place a task can run and what running it there contributes."""

    provider: str
    region: str
    values: Values


@dataclass(frozen=True)
class Flow:
    """Data moving along an edge; charged by the source's provider."""

    src: int
    dst: int
    leave_cloud: dict[str, Values] = field(default_factory=dict)
    """Source provider -> values when the destination is another provider."""
    leave_region: dict[str, Values] = field(default_factory=dict)
    """Source provider -> values when the destination is another region of the same provider."""


def _edge_values(flow: Flow, a: Choice, b: Choice) -> Values:
    if a.provider != b.provider:
        return flow.leave_cloud.get(a.provider, (0.0, 0.0))
    if a.region != b.region:
        return flow.leave_region.get(a.provider, (0.0, 0.0))
    return (0.0, 0.0)


def total(choices: list[list[Choice]], flows: list[Flow], picks: list[int]) -> Values:
    """Objective values of one placement (``picks[i]`` indexes ``choices[i]``)."""
    first = sum(choices[i][k].values[0] for i, k in enumerate(picks))
    second = sum(choices[i][k].values[1] for i, k in enumerate(picks))
    for flow in flows:
        moved = _edge_values(flow, choices[flow.src][picks[flow.src]], choices[flow.dst][picks[flow.dst]])
        first, second = first + moved[0], second + moved[1]
    return first, second


def brute_force(choices: list[list[Choice]], flows: list[Flow]) -> Values:
    """The best objective values by trying every placement (small DAGs; the tests' oracle)."""
    return min(
        total(choices, flows, list(picks)) for picks in itertools.product(*(range(len(c)) for c in choices))
    )


def place(choices: list[list[Choice]], flows: list[Flow]) -> list[int]:
    """The placement minimising (primary, secondary) lexicographically."""
    from ortools.sat.python import cp_model

    model = cp_model.CpModel()
    x = [[model.new_bool_var(f"x{i}_{k}") for k in range(len(row))] for i, row in enumerate(choices)]
    for row in x:
        model.add_exactly_one(row)
    terms: list[list[tuple[Any, Values]]] = [
        [(x[i][k], c.values) for k, c in enumerate(row)] for i, row in enumerate(choices)
    ]
    for e, flow in enumerate(flows):
        terms.append(_flow_terms(model, x, choices, flow, e))
    linear = [(var, values) for group in terms for var, values in group]

    def expression(axis: int) -> Any:
        return sum(int(round(values[axis] * _SCALE)) * var for var, values in linear if values[axis])

    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = 7
    solver.parameters.max_time_in_seconds = 30.0
    for axis in (0, 1):
        objective = expression(axis)
        model.minimize(objective)
        status = solver.solve(model)
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            raise RuntimeError(f"the placement model has no solution ({solver.status_name(status)})")
        best = int(round(solver.objective_value))
        model.add(objective <= best)
    return [next(k for k, var in enumerate(row) if solver.value(var)) for row in x]


def _flow_terms(
    model: Any, x: list[list[Any]], choices: list[list[Choice]], flow: Flow, e: int
) -> list[tuple[Any, Values]]:
    """Variables (with their signed values) whose sum is the edge's data-movement cost."""
    u, v = flow.src, flow.dst
    terms: list[tuple[Any, Values]] = []
    providers = sorted({c.provider for c in choices[u]} | {c.provider for c in choices[v]})
    for p in providers:
        on_u = [x[u][k] for k, c in enumerate(choices[u]) if c.provider == p]
        on_v = [x[v][k] for k, c in enumerate(choices[v]) if c.provider == p]
        cloud_cost = flow.leave_cloud.get(p, (0.0, 0.0))
        region_cost = flow.leave_region.get(p, (0.0, 0.0))
        terms += [(var, cloud_cost) for var in on_u]
        if not on_u or not on_v:
            continue
        same_cloud = model.new_bool_var(f"c{e}_{p}")
        model.add(same_cloud <= sum(on_u))
        model.add(same_cloud <= sum(on_v))
        terms.append((same_cloud, (region_cost[0] - cloud_cost[0], region_cost[1] - cloud_cost[1])))
        same_regions = []
        for region in sorted({c.region for c in choices[u] if c.provider == p}):
            in_u = [x[u][k] for k, c in enumerate(choices[u]) if (c.provider, c.region) == (p, region)]
            in_v = [x[v][k] for k, c in enumerate(choices[v]) if (c.provider, c.region) == (p, region)]
            if not in_v:
                continue
            same = model.new_bool_var(f"r{e}_{p}_{region}")
            model.add(same <= sum(in_u))
            model.add(same <= sum(in_v))
            same_regions.append(same)
            terms.append((same, (-region_cost[0], -region_cost[1])))
        if same_regions:
            model.add(sum(same_regions) <= same_cloud)
    return terms
