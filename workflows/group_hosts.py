"""A job group's tasks reach each other by name, ``<task>-<rank>.<group>`` (``JobGroup.hostnames``).

As SkyPilot does on VMs, every run of the group first adds the group's names to its node's
``/etc/hosts`` (as root, or through passwordless ``sudo``; once per node, the block marked by the
group's name), so ``trainer-0.rl`` resolves to the trainer's head node. Nodes that are folders on
the worker's machine (``local``, ``sim``) share that machine's ``/etc/hosts``, which a job must
never change: there the names are not added, and ``SKYHOP_JOBGROUP_<NAME>_IPS`` remain the way.
A node that cannot write the file says so in its output and the run goes on.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable

__all__ = ["hostname", "hosts_lines", "with_hosts"]


def hostname(task_name: str, rank: int, group_name: str) -> str:
    """The name rank ``rank`` of task ``task_name`` is reached by (SkyPilot's form)."""
    return f"{task_name}-{rank}.{group_name}"


def hosts_lines(group_name: str, tasks: Iterable[tuple[str, list[str]]]) -> list[str]:
    """``/etc/hosts`` lines for every node of ``tasks`` (task name, node addresses in rank order)."""
    return [f"{ip} {hostname(task, rank, group_name)}" for task, ips in tasks for rank, ip in enumerate(ips)]


def with_hosts(run: str, group_name: str, lines: list[str], hosts_file: str = "/etc/hosts") -> str:
    """``run`` after a prelude that adds ``lines`` to the node's ``hosts_file`` once."""
    marker = f"# skyhop job group {group_name}"
    block = shlex.quote("\n".join([marker, *lines]) + "\n")
    path = shlex.quote(hosts_file)
    prelude = (
        f"if ! grep -qxF {shlex.quote(marker)} {path} 2>/dev/null; then "
        f'if [ "$(id -u)" = 0 ]; then printf %s {block} >> {path}; '
        f"else printf %s {block} | sudo -n tee -a {path} >/dev/null; fi "
        f"|| echo {shlex.quote(f'skyhop: could not add the job group hostnames to {hosts_file}')} >&2; fi"
    )
    return f"{prelude}\n{run}"
