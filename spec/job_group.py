"""``JobGroup``: how the tasks of a parallel group (SkyPilot's job groups) live and end together.

The header document of an ``execution: parallel`` file may hold, beside ``name`` and ``execution``:

* ``primary_tasks: [NAME, ...]``: the tasks whose end is the group's end. Once every primary task
  has ended, the others (auxiliary tasks: servers, buffers that never end by themselves) are
  stopped, and the group's status is the primary tasks'. Empty or absent: every task is primary.
* ``termination_delay``: how long an auxiliary task is left running after the primary tasks
  ended (to flush its data): a duration (``30s``, ``5m``, ``1h``, a number of seconds), or
  ``{default: DURATION, TASK: DURATION}`` per task. Default 0.
* ``inter_connection: true``: the tasks must reach each other by name (``<task>-<rank>.<group>``),
  so the names must make hostnames; a group whose names do gets them anyway, as in SkyPilot.
* ``placement: SAME_INFRA``: every task on the same provider and region.

``job_group_from_header`` checks them against the group's tasks, one line naming the field.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict

from skyhop.spec.errors import SpecError, did_you_mean
from skyhop.spec.limits import MAX_TERMINATION_DELAY_SECONDS

__all__ = ["GROUP_FIELDS", "JobGroup", "Placement", "job_group_from_header", "parse_delay_seconds"]

GROUP_FIELDS = ("primary_tasks", "termination_delay", "inter_connection", "placement")
"""Header fields that only a job group (``execution: parallel``) has."""

DEFAULT_DELAY_KEY = "default"
"""The key of a per-task ``termination_delay`` for the auxiliary tasks it does not name."""


class Placement(StrEnum):
    """Where a group's tasks go relative to each other: the header's ``placement``."""

    SAME_INFRA = "SAME_INFRA"
    """Every task on the same provider and region (a Kubernetes context is a region)."""


class JobGroup(BaseModel):
    """A parallel group's header fields, checked against its tasks."""

    model_config = ConfigDict(frozen=True)

    primary_tasks: list[str] = []
    """Names of the tasks whose end is the group's end; empty: every task."""
    termination_delays: dict[str, float] = {}
    """Seconds an auxiliary task keeps running after the primary tasks ended, by task name;
    ``default`` for the others."""
    inter_connection: bool = False
    """Asked for hostnames: the header is refused unless the names make them."""
    hostnames: bool = False
    """Whether the runs add ``<task>-<rank>.<group>`` to their nodes' hosts files: with
    ``inter_connection``, or whenever the names make hostnames (SkyPilot names every group's nodes,
    and its examples use the names without asking)."""
    placement: Placement | None = None
    name: str = ""
    """The group's name: the domain of its tasks' hostnames."""

    def is_primary(self, task_name: str | None) -> bool:
        return not self.primary_tasks or task_name in self.primary_tasks

    def delay_seconds(self, task_name: str | None) -> float:
        """Seconds task ``task_name`` (an auxiliary) is left running once the primary tasks ended."""
        delays = self.termination_delays
        return delays.get(task_name or "", delays.get(DEFAULT_DELAY_KEY, 0.0))


_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhd]?)")
_SECONDS_PER = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
_HOSTNAME_LABEL = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?")


def parse_delay_seconds(value: object, field: str) -> float:
    """A ``termination_delay`` in seconds: a number of seconds, or ``30s``, ``5m``, ``1h``, ``1d``."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str) and (match := _DURATION.fullmatch(value.strip().lower())):
        seconds = float(match.group(1)) * _SECONDS_PER[match.group(2)]
    else:
        raise SpecError(field, f"must be a duration like 30s, 5m or 1h (or seconds), got {str(value)[:60]!r}")
    if not 0 <= seconds <= MAX_TERMINATION_DELAY_SECONDS:
        raise SpecError(
            field, f"must be between 0s and {MAX_TERMINATION_DELAY_SECONDS // 3600}h, got {value!r}"
        )
    return seconds


def job_group_from_header(
    header: Mapping[Any, Any], name: str | None, task_names: Sequence[str | None]
) -> JobGroup:
    """The group fields of a parallel header, checked against its tasks' names."""
    primary = _primary_tasks(header.get("primary_tasks"), task_names)
    delays = _termination_delays(header.get("termination_delay"), task_names, primary)
    inter_connection = header.get("inter_connection", False)
    if not isinstance(inter_connection, bool):
        raise SpecError("inter_connection", f"must be true or false, got {str(inter_connection)[:60]!r}")
    unnamed = _hostname_problem(name, task_names)
    if inter_connection and unnamed is not None:
        raise SpecError("inter_connection", unnamed)
    raw = header.get("placement")
    allowed = [p.value for p in Placement]
    if raw is not None and raw not in allowed:
        raise SpecError("placement", f"must be {', '.join(allowed)}, got {str(raw)[:60]!r}")
    return JobGroup(
        primary_tasks=primary,
        termination_delays=delays,
        inter_connection=inter_connection,
        hostnames=unnamed is None,
        placement=None if raw is None else Placement(raw),
        name=name or "",
    )


def _primary_tasks(raw: object, task_names: Sequence[str | None]) -> list[str]:
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(item, str) for item in raw):
        raise SpecError("primary_tasks", f"must be a list of task names, got {str(raw)[:60]!r}")
    named = [n for n in task_names if n is not None]
    for item in raw:
        if item not in named:
            raise SpecError(
                "primary_tasks",
                f"no task is named {item!r}{did_you_mean(item, named)}; "
                f"the tasks: {', '.join(named) or 'none named'}",
            )
        if named.count(item) > 1:
            raise SpecError(
                "primary_tasks", f"{named.count(item)} tasks are named {item!r}; give each its own name"
            )
    if len(set(raw)) != len(raw):
        raise SpecError("primary_tasks", "names a task twice")
    return list(raw)


def _termination_delays(
    raw: object, task_names: Sequence[str | None], primary: list[str]
) -> dict[str, float]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        return {DEFAULT_DELAY_KEY: parse_delay_seconds(raw, "termination_delay")}
    auxiliary = [n for n in task_names if n is not None and n not in primary]
    delays = {}
    for key, value in raw.items():
        key = str(key)
        if key != DEFAULT_DELAY_KEY and key not in auxiliary:
            allowed = ", ".join([DEFAULT_DELAY_KEY, *auxiliary])
            raise SpecError(
                f"termination_delay.{key}",
                f"not an auxiliary task (one not in primary_tasks){did_you_mean(key, auxiliary)}; "
                f"allowed: {allowed}",
            )
        delays[key] = parse_delay_seconds(value, f"termination_delay.{key}")
    return delays


def _hostname_problem(group: str | None, task_names: Sequence[str | None]) -> str | None:
    """Why ``<task>-<rank>.<group>`` cannot name the nodes (every task named once, in lower-case
    DNS labels); None when it can."""
    if group is None or not _HOSTNAME_LABEL.fullmatch(group):
        return f"the group's name {group!r} must be a hostname label (a-z, 0-9, '-') to reach tasks by name"
    for index, task in enumerate(task_names):
        if task is None or not _HOSTNAME_LABEL.fullmatch(task) or task_names.count(task) > 1:
            return (
                f"task {index + 1} is named {task!r}: each task needs a name of its own, "
                "a hostname label (a-z, 0-9, '-')"
            )
    return None
