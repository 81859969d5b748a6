"""Label and field selectors, parsed and matched as the API server does, with its error messages.

Label selectors: ``k``, ``!k``, ``k=v``, ``k==v``, ``k!=v``, ``k in (a,b)``, ``k notin (a,b)``,
comma-separated (all must hold). Field selectors: ``f=v``, ``f==v``, ``f!=v`` over the fields each
resource supports (``FIELDS``); any other field is a 400 ``field label not supported``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from tests.fakes.kubernetes.status import StatusError

__all__ = ["FIELDS", "Selector", "field_selector", "label_selector"]

Selector = Callable[[dict[str, Any]], bool]

_SET = re.compile(r"^\s*(?P<key>[^\s!=,()]+)\s+(?P<op>in|notin)\s+\((?P<values>[^)]*)\)\s*$")
_EQ = re.compile(r"^\s*(?P<key>[^\s!=,()]+)\s*(?P<op>==|=|!=)\s*(?P<value>[^\s!=,()]*)\s*$")
_EXISTS = re.compile(r"^\s*(?P<neg>!?)\s*(?P<key>[^\s!=,()]+)\s*$")

_COMMON = ("metadata.name", "metadata.namespace")
FIELDS: dict[str, tuple[str, ...]] = {
    "pods": _COMMON
    + (
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    ),
    "nodes": _COMMON + ("spec.unschedulable",),
    "events": _COMMON
    + tuple(
        f"involvedObject.{f}"
        for f in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")
    )
    + ("reason", "reportingComponent", "source", "type"),
    "secrets": _COMMON + ("type",),
    "services": _COMMON + ("spec.clusterIP", "spec.type"),
    "namespaces": _COMMON + ("status.phase",),
}


def _split(selector: str) -> list[str]:
    """Comma-separated requirements; commas inside ``( )`` belong to a set."""
    parts, depth, current = [], 0, ""
    for char in selector:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return [part for part in parts if part.strip()]


def label_selector(selector: str) -> Selector:
    tests: list[Callable[[dict[str, str]], bool]] = []
    for part in _split(selector):
        if found := _SET.match(part):
            key, values = found["key"], {v.strip() for v in found["values"].split(",") if v.strip()}
            if found["op"] == "in":
                tests.append(lambda labels, k=key, vs=values: labels.get(k) in vs)
            else:
                tests.append(lambda labels, k=key, vs=values: labels.get(k) not in vs)
        elif found := _EQ.match(part):
            key, value = found["key"], found["value"]
            if found["op"] == "!=":
                tests.append(lambda labels, k=key, v=value: labels.get(k) != v)
            else:
                tests.append(lambda labels, k=key, v=value: labels.get(k) == v)
        elif found := _EXISTS.match(part):
            key, negated = found["key"], found["neg"] == "!"
            tests.append(lambda labels, k=key, n=negated: (k in labels) != n)
        else:
            raise StatusError(400, "BadRequest", f"unable to parse requirement: {part.strip()!r}")

    def matches(obj: dict[str, Any]) -> bool:
        labels = obj.get("metadata", {}).get("labels") or {}
        return all(test(labels) for test in tests)

    return matches


def _field(obj: dict[str, Any], path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if path == "source" and isinstance(value, dict):
        value = value.get("component")
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def field_selector(resource: str, selector: str) -> Selector:
    tests: list[Callable[[dict[str, Any]], bool]] = []
    for part in _split(selector):
        found = _EQ.match(part)
        if found is None:
            raise StatusError(400, "BadRequest", f"invalid selector: '{selector}'; can't understand '{part}'")
        path, value = found["key"], found["value"]
        if path not in FIELDS.get(resource, _COMMON):
            raise StatusError(400, "BadRequest", f"field label not supported: {path}")
        if found["op"] == "!=":
            tests.append(lambda obj, p=path, v=value: _field(obj, p) != v)
        else:
            tests.append(lambda obj, p=path, v=value: _field(obj, p) == v)
    return lambda obj: all(test(obj) for test in tests)
