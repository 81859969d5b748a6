"""Joint placement of a DAG's tasks with an OR-Tools MIP (SCIP): node costs plus data-movement costs.

Each task picks one (provider, region) place; what moving data costs depends only on whether two
places share a region, a provider, or neither. So the pairwise cost linearises with two small sets
of indicators per edge instead of one variable per pair of places:

* ``same_cloud[p] <= onCloud(u, p)``, ``<= onCloud(v, p)``
* ``same_region[r] <= onRegion(u, r)``, ``<= onRegion(v, r)``, and per cloud sum(same_region) <= same_cloud
* edge cost = sum_p leave_cloud[p] * (onCloud(u, p) - same_cloud[p])
  + sum_p leave_region[p] * (same_cloud[p] - sum_{r in p} same_region[r])

Minimising pushes every indicator up to the product it stands for, so the model is exact. Two
objectives (time, then cost) are solved lexicographically. SCIP is deterministic, so equal optima
resolve the same way every time. (``pywraplp`` loads in ~50 ms; CP-SAT's Python module pulls in
pandas and takes ~700 ms, more than the whole optimize budget.)
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from skyhop.providers.extras import require_extra

__all__ = ["Choice", "Flow", "brute_force", "place", "total"]

_TOLERANCE = 1e-7
"""Slack when the first objective's optimum becomes a constraint for the second."""

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
    """The placement minimising (primary, secondary) lexicographically.

    OR-Tools is the ``dag`` extra (with numpy and pandas, about 240 MB): only a chain whose tasks
    move data between them needs it, so a plain install raises ``ExtraMissingError`` here.
    """
    require_extra("dag", "placing a chain that moves data (outputs:)")
    from ortools.linear_solver import pywraplp

    solver = pywraplp.Solver.CreateSolver("SCIP")
    x = [[solver.BoolVar(f"x{i}_{k}") for k in range(len(row))] for i, row in enumerate(choices)]
    for row in x:
        solver.Add(solver.Sum(row) == 1)
    linear: list[tuple[Any, Values]] = [
        (x[i][k], c.values) for i, row in enumerate(choices) for k, c in enumerate(row)
    ]
    for e, flow in enumerate(flows):
        linear += _flow_terms(solver, x, choices, flow, e)
    picks: list[int] = []
    for axis in (0, 1):
        terms = [values[axis] * var for var, values in linear if values[axis]]
        if picks and not terms:
            break
        objective = solver.Sum(terms)
        solver.Minimize(objective)
        if solver.Solve() != pywraplp.Solver.OPTIMAL:
            raise RuntimeError("the placement model has no optimal solution")
        picks = [next(k for k, var in enumerate(row) if var.solution_value() > 0.5) for row in x]
        solver.Add(objective <= solver.Objective().Value() + _TOLERANCE)  # keep it while improving the next
    return picks


def _flow_terms(
    solver: Any, x: list[list[Any]], choices: list[list[Choice]], flow: Flow, e: int
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
        same_cloud = solver.BoolVar(f"c{e}_{p}")
        solver.Add(same_cloud <= sum(on_u))
        solver.Add(same_cloud <= sum(on_v))
        terms.append((same_cloud, (region_cost[0] - cloud_cost[0], region_cost[1] - cloud_cost[1])))
        same_regions = []
        for region in sorted({c.region for c in choices[u] if c.provider == p}):
            in_u = [x[u][k] for k, c in enumerate(choices[u]) if (c.provider, c.region) == (p, region)]
            in_v = [x[v][k] for k, c in enumerate(choices[v]) if (c.provider, c.region) == (p, region)]
            if not in_v:
                continue
            same = solver.BoolVar(f"r{e}_{p}_{region}")
            solver.Add(same <= sum(in_u))
            solver.Add(same <= sum(in_v))
            same_regions.append(same)
            terms.append((same, (-region_cost[0], -region_cost[1])))
        if same_regions:
            solver.Add(sum(same_regions) <= same_cloud)
    return terms
