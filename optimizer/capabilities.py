"""Which providers can serve a request at all: their capabilities against what the task needs.

The optimizer leaves out a provider that lacks something the task asks for (spot, open ports, a
custom image, a disk size, more nodes than it holds, an absolute file-mount target), so failover
never spends an attempt on it nor silently ignores what it cannot do, and the plan says which
providers it left out and why. The comparison itself is ``Capabilities.shortfall``, the same one a
provider's ``launch`` refuses a request with.
"""

from __future__ import annotations

from collections.abc import Iterable

from skyhop.providers.base import Needs, Shortfall
from skyhop.providers.pod_run_options import pod_options
from skyhop.providers.registry import capabilities_of
from skyhop.spec import Resources, Task

__all__ = ["left_out", "pinned_refusal", "shortfall", "task_needs"]


def task_needs(task: Task, resources: Resources) -> Needs:
    """What ``task`` needs of a provider when it runs on the alternative ``resources``."""
    return Needs(
        num_nodes=task.num_nodes,
        spot=resources.use_spot,
        ports=bool(resources.ports),
        custom_image=resources.image_id is not None,
        disk_size=resources.disk_size is not None,
        disk_tier=resources.disk_tier,
        labels=bool(resources.labels),
        priority_class=resources.priority_class is not None,
        absolute_mount=next((target for target in task.file_mounts if target.startswith("/")), None),
        pod_incompatible_option=pod_options(task.config.docker.arguments).unsupported,
    )


def shortfall(provider: str, needs: Needs) -> Shortfall | None:
    """What ``provider`` lacks for ``needs``; None when it can serve them (or is unknown here: its
    attempt reports that instead)."""
    capabilities = capabilities_of(provider)
    return None if capabilities is None else capabilities.shortfall(needs)


def left_out(task: Task, providers: Iterable[str]) -> dict[str, str]:
    """``provider -> why`` for each of ``providers`` that every alternative allowing it cannot use."""
    why: dict[str, str] = {}
    for name in providers:
        allowing = [alt for alt in task.resources.alternatives if alt.cloud in (None, name)]
        found = [shortfall(name, task_needs(task, alt)) for alt in allowing]
        first = found[0] if found else None
        if first is not None and all(found):
            why[name] = f"{name} does not support {first.feature}"
    return why


def pinned_refusal(task: Task) -> tuple[str, str] | None:
    """``(field, reason)`` when every provider ``task`` is pinned to lacks something it needs, else None.

    What the optimizer would only report as "no feasible offering", said as the task field to
    change, before anything starts. A task that may run anywhere, or on one provider that can, is
    not refused.
    """
    reasons: list[tuple[str, str]] = []
    for resources in task.resources.alternatives:
        name = resources.cloud
        found = None if name is None else shortfall(name, task_needs(task, resources))
        if name is None or found is None:
            return None
        reasons.append((found.field, f"{name} does not support {found.feature}"))
    return reasons[0]
