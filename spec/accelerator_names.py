"""Accelerator names SkyPilot's catalog gives to more than one of skyhop's.

AWS's API, and so SkyPilot's catalog built from it, names both Inferentia generations ``Inferentia``
(an inf2.24xlarge has ``Inferentia:6``, an inf1.24xlarge ``Inferentia:16``); skyhop's catalogs tell
them apart (``Inferentia2``). So a task's ``Inferentia:N`` asks for either chip with N of them: it
is read as the set ``{Inferentia:N, Inferentia2:N}``, the cheaper fitting one winning, before the
resources are validated (once: a validated request names each chip on its own).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from skyhop.spec.resources import parse_accelerator_choices

__all__ = ["with_skypilot_names"]

_ALSO = {"INFERENTIA": "INFERENTIA2"}


def with_skypilot_names(resources: Mapping[str, Any]) -> dict[str, Any]:
    """``resources`` (raw YAML) with each accelerator request that names ``Inferentia`` made a choice
    of both generations, in its own ``accelerators``/``gpus`` and in each ``any_of``/``ordered`` item."""
    data = _rewritten(resources)
    for choices in ("any_of", "ordered"):
        items = data.get(choices)
        if isinstance(items, list):
            data[choices] = [_rewritten(item) if isinstance(item, Mapping) else item for item in items]
    return data


def _rewritten(resources: Mapping[str, Any]) -> dict[str, Any]:
    data = dict(resources)
    for field in ("accelerators", "gpus"):
        if data.get(field) is not None:
            data[field] = _either_chip(data[field])
    return data


def _either_chip(raw: object) -> object:
    try:
        choices, in_order = parse_accelerator_choices(raw)
    except ValueError:
        return raw  # validation reports it, with its field path
    if not any(name in _ALSO for choice in choices for name in choice):
        return raw
    expanded: list[tuple[str, float]] = []
    for choice in choices:
        ((name, count),) = choice.items()
        for each in (name, _ALSO.get(name)):
            if each is not None and (each, count) not in expanded:
                expanded.append((each, count))
    if in_order:
        return [{name: count} for name, count in expanded]
    return dict(expanded)
