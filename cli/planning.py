"""The plan a launch would carry out, printed before it (and alone for ``--dryrun``)."""

from __future__ import annotations

from cli.output import fail, info, table
from spec import Task

__all__ = ["print_plan"]


def print_plan(task: Task) -> int:
    """Optimize in-process (no server needed) and print the chosen offering and the others."""
    from optimizer import NoFeasibleOfferingError, optimize
    from providers.registry import get_provider, provider_names

    offerings = [o for name in provider_names() for o in get_provider(name).offerings()]
    try:
        plan = optimize(task, offerings)
    except NoFeasibleOfferingError as exc:
        fail(str(exc))
    info(f"Considered resources ({task.num_nodes} node{'s' if task.num_nodes > 1 else ''}):")
    rows = []
    for offering in plan.candidates[:10]:
        price = offering.spot_price if task.resources.use_spot else offering.price
        rows.append(
            [
                offering.location,
                offering.instance_type + ("[Spot]" if task.resources.use_spot else ""),
                f"{offering.cpus:g}",
                f"{offering.memory_gib:g}",
                ", ".join(f"{n}:{c:g}" for n, c in offering.accelerators.items()) or "-",
                f"{(price or 0) * task.num_nodes:.2f}",
                "✔" if offering == plan.chosen else "",
            ]
        )
    table(["INFRA", "INSTANCE", "vCPUs", "Mem(GB)", "GPUS", "COST ($/h)", "CHOSEN"], rows)
    return 0
