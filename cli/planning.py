"""The plan a launch would carry out, printed before it (and alone for ``--dryrun``).

Like SkyPilot's "Considered resources" table: per task, each provider's best candidate and its
runner-up (the best elsewhere: another region, or another instance type), the chosen row marked,
then the providers left out because they cannot do what the task needs, and why.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from skyhop.cli.output import EXIT_USAGE, fail, info, print_json, table
from skyhop.spec import Task
from skyhop.spec.errors import REDACTED
from skyhop.spec.pool import POOL_APPLY_HINT, pool_refusal

if TYPE_CHECKING:
    from skyhop.optimizer import Candidate, DagPlan, Minimize, Plan
    from skyhop.spec import Dag, JobGroup, TaskOverrides
    from skyhop.spec.storage import Storage

__all__ = [
    "dryrun",
    "place_dag",
    "placed_together",
    "planned_dag",
    "placeable",
    "plan_document",
    "print_dag_plan",
    "print_plan",
]


def print_plan(task: Task, minimize: Minimize = "cost") -> int:
    """Optimize in-process (no server needed) and print the plan table."""
    from skyhop.spec import Dag

    return print_dag_plan(Dag.chain([task]), minimize)


def print_dag_plan(dag: Dag, minimize: Minimize = "cost", *, as_json: bool = False, source: str = "") -> int:
    """``print_plan`` for every task of a pipeline or group (``jobs launch``, ``--dryrun``); a pool
    file's (``source``) plan says what its workers cost and how to apply it."""
    plan = place_dag(dag, minimize)
    if as_json:
        print_json("plan", **plan_document(plan, dag, source=source))
        return 0
    _show(plan, dag)
    for node, task_plan in zip(dag.tasks, plan.plans, strict=True):
        if node.task.pool is not None:
            workers = node.task.pool.size
            cost = task_plan.hourly_cost * workers
            info(f"Pool: {workers} workers as planned above, ${cost:.4f} / hour in all")
            info(pool_refusal(source, workers))
    return 0


def dryrun(entrypoint: str, overrides: TaskOverrides, *, as_json: bool, minimize: Minimize) -> int:
    """``launch --dryrun`` / ``optimize``: place a task or a chain and print the plan (or JSON)."""
    from skyhop.spec import SpecError

    try:
        dag = planned_dag(entrypoint, overrides)
    except SpecError as exc:
        fail(str(exc), EXIT_USAGE)
    return print_dag_plan(dag, minimize, as_json=as_json, source=entrypoint)


def planned_dag(entrypoint: str, overrides: TaskOverrides) -> Dag:
    """The tasks ``--dryrun`` plans: loaded, overridden and placeable (``SpecError`` otherwise)."""
    from skyhop.spec import load_dag

    dag = load_dag(entrypoint, overrides.values(), overrides.secret_values().values())
    tasks = [n.model_copy(update={"task": placeable(overrides.apply(n.task))}) for n in dag.tasks]
    return dag.model_copy(update={"tasks": tasks})


def placeable(task: Task) -> Task:
    """``task`` pinned where its volumes are, unless every provider it is pinned to lacks what it
    needs (``SpecError``, exit 2)."""
    from skyhop.cli.volume_placement import pinned_to_volumes
    from skyhop.optimizer.capabilities import pinned_refusal
    from skyhop.spec import SpecError

    task = pinned_to_volumes(task)
    refusal = pinned_refusal(task)
    if refusal is not None:
        raise SpecError(*refusal)
    return task


def place_dag(dag: Dag, minimize: Minimize) -> DagPlan:
    """The plan of every task, placed jointly; an impossible one ends the command in one line."""
    from skyhop.optimizer import NoFeasibleOfferingError, optimize_dag
    from skyhop.providers.catalog import CatalogError
    from skyhop.providers.extras import ExtraMissingError

    pinned = {alt.cloud for node in dag.tasks for alt in node.task.resources.alternatives if alt.cloud}
    if pinned:
        # What only Temporal holds (SSH pools) is fetched for a task pinned there alone: other
        # plans still need no server.
        from skyhop.optimizer.plan import load_offerings

        asyncio.run(load_offerings(pinned))
    try:
        return optimize_dag(dag, minimize=minimize)
    except (NoFeasibleOfferingError, CatalogError, ExtraMissingError) as exc:
        fail(str(exc))


def placed_together(dag: Dag, plan: DagPlan) -> Dag:
    """A ``placement: SAME_INFRA`` group with each task pinned to the provider and region ``plan``
    chose for them all (and its zone, for a task pinned to one): each task's own searches, a
    recovery's too, then stay there."""
    from skyhop.spec import TaskOverrides

    nodes = []
    for node, task_plan in zip(dag.tasks, plan.plans, strict=True):
        chosen = task_plan.chosen
        place = [chosen.provider, *([chosen.region] if chosen.region else [])]
        if chosen.region and node.task.resources.zone is not None and chosen.zone is not None:
            place.append(chosen.zone)
        pinned = TaskOverrides(infra="/".join(place)).apply(node.task)
        nodes.append(node.model_copy(update={"task": pinned}))
    return dag.model_copy(update={"tasks": nodes})


def _accelerators(accelerators: dict[str, float]) -> str:
    return ", ".join(f"{n}:{c:g}" for n, c in accelerators.items()) or "-"


def _candidate_json(candidate: Candidate, chosen: bool) -> dict[str, Any]:
    o = candidate.offering
    return {
        "provider": o.provider,
        "region": o.region,
        "zone": o.zone,
        "instance_type": o.instance_type,
        "cpus": o.cpus,
        "memory_gib": o.memory_gib,
        "accelerators": o.accelerators,
        "use_spot": candidate.use_spot,
        "image_id": candidate.image_id,
        "hourly_cost": round(candidate.hourly_cost, 6),
        "estimated_hours": candidate.hours,
        "chosen": chosen,
    }


def _left_out(dag: Dag) -> list[dict[str, str]]:
    """Per task, ``provider -> why`` for the candidate providers it cannot use."""
    from skyhop.optimizer.capabilities import left_out
    from skyhop.providers.registry import provider_names

    names = provider_names()
    return [left_out(node.task, names) for node in dag.tasks]


def plan_document(plan: DagPlan, dag: Dag, *, source: str = "FILE") -> dict[str, Any]:
    """The plan as ``print_json`` fields: one item per task, then the totals. A pool task's item
    says how many workers it plans and the command that applies ``source``, its file."""
    from skyhop.storage.plan import storage_plan

    tasks = []
    for p, left, node in zip(plan.plans, _left_out(dag), dag.tasks, strict=True):
        c = p.chosen
        task = node.task
        tasks.append(
            {
                "name": p.task_name,
                "num_nodes": p.num_nodes,
                "provider": c.provider,
                "region": c.region,
                "zone": c.zone,
                "instance_type": c.instance_type,
                "cpus": c.cpus,
                "memory_gib": c.memory_gib,
                "accelerators": c.accelerators,
                "use_spot": p.use_spot,
                "image_id": p.choice.image_id,
                "docker_image": task.resources.docker_image,
                "disk_size": p.choice.disk_size,
                "disk_tier": p.choice.disk_tier,
                "network_tier": p.choice.network_tier,
                "accelerator_args": p.choice.accelerator_args.model_dump()
                if p.choice.accelerator_args
                else None,
                "labels": p.choice.labels,
                "config": task.config.model_dump(exclude_defaults=True),
                "workdir": task.workdir_git.model_dump() if task.workdir_git else _shown(task.workdir, task),
                "file_mounts": {_shown(k, task): _shown_mount(v, task) for k, v in task.file_mounts.items()},
                "volumes": task.volumes,
                "secrets": dict.fromkeys(task.secrets, REDACTED),
                "service": task.service is not None,
                "pool": None
                if task.pool is None
                else {"workers": task.pool.size, "apply": POOL_APPLY_HINT.format(file=source)},
                "hourly_cost": round(p.hourly_cost, 6),
                "estimated_hours": p.estimated_hours,
                "candidates": [_candidate_json(k, i == 0) for i, k in enumerate(p.considered)],
                "left_out": left,
                "storage": [m.model_dump(mode="json") for m in storage_plan(node.task.file_mounts)],
                **({"primary": dag.group.is_primary(task.name)} if dag.group is not None else {}),
            }
        )
    return {
        "items": tasks,
        "minimize": plan.minimize,
        "total_hourly_cost": round(plan.hourly_cost, 6),
        "egress_cost": round(plan.egress_cost, 6),
        "total_cost": round(plan.total_cost, 6),
    }


def _shown(text: str | None, task: Task) -> str | None:
    """A path as displayed: a secret ``${VAR}`` filled into it is redacted."""
    from skyhop.spec.errors import redacted

    return None if text is None else redacted(text, task.secrets.values())


def _shown_mount(entry: str | Storage, task: Task) -> str | dict[str, Any] | None:
    """A mount's source as displayed: a path or URL, or a storage dict, with secrets redacted."""
    if isinstance(entry, str):
        return _shown(entry, task)
    return {
        key: _shown(value, task) if isinstance(value, str) else value
        for key, value in entry.model_dump(mode="json").items()
    }


def _rows(plan: Plan) -> list[Candidate]:
    """Per provider: its best candidate and the best one elsewhere; providers by their best."""
    rows: list[Candidate] = []
    seen: dict[str, list[Candidate]] = {}
    for candidate in plan.considered:
        held = seen.setdefault(candidate.offering.provider, [])
        o = candidate.offering
        if not held or (
            len(held) == 1
            and (o.region, o.instance_type) != (held[0].offering.region, held[0].offering.instance_type)
        ):
            held.append(candidate)
    for held in seen.values():
        rows += held
    return rows


def _group_line(group: JobGroup) -> str:
    """How a job group's tasks live together, above its plan."""
    parts = ["every task at once"]
    if group.primary_tasks:
        parts.append(f"it ends with {', '.join(group.primary_tasks)}; the others are then stopped")
    if group.placement is not None:
        parts.append(f"placement {group.placement}: one provider and region")
    return f"Job group {group.name or '(unnamed)'}: {'; '.join(parts)}"


def _show(plan: DagPlan, dag: Dag) -> None:
    from skyhop.storage.plan import storage_plan

    info(f"Target: minimizing {plan.minimize}")
    if dag.group is not None:
        info(_group_line(dag.group))
    for p, left, node in zip(plan.plans, _left_out(dag), dag.tasks, strict=True):
        nodes = f"{p.num_nodes} node{'s' if p.num_nodes > 1 else ''}"
        title = f"Task {p.task_name!r}" if len(plan.plans) > 1 else "Considered resources"
        info(f"{title} ({nodes}):")
        rows = []
        for i, k in enumerate(_rows(p)):
            o = k.offering
            rows.append(
                [
                    o.provider,
                    o.instance_type + ("[Spot]" if k.use_spot else ""),
                    f"{o.cpus:g}",
                    f"{o.memory_gib:g}",
                    _accelerators(o.accelerators),
                    "/".join(x for x in (o.region, o.zone) if x) or "-",
                    f"{k.hourly_cost:.4f}",
                    f"{k.hours:g}",
                    "✔" if i == 0 else "",
                ]
            )
        table(
            ["INFRA", "INSTANCE", "vCPUs", "Mem(GB)", "GPUS", "REGION/ZONE", "$/HOUR", "HOURS", "CHOSEN"],
            rows,
        )
        for why in left.values():
            info(f"Left out: {why}")
        if node.task.resources.docker_image:
            info(f"Container: setup and run execute in {node.task.resources.docker_image} (docker or podman)")
        for mount in storage_plan(node.task.file_mounts):
            info(f"Storage: {mount.target} <- {mount.describe()}")
    egress = f" + ${plan.egress_cost:.2f} to move data" if plan.egress_cost else ""
    info(f"Estimated cost: ${plan.hourly_cost:.4f} / hour{egress}")
