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


def _holds(op: str, present: bool, value: str | None, values: frozenset[str]) -> bool:
    return {
        "in": value in values,
        "notin": value not in values,
        "=": value in values,
        "!=": value not in values,
        "exists": present,
        "!": not present,
    }[op]


def label_selector(selector: str) -> Selector:
    requirements: list[tuple[str, str, frozenset[str]]] = []
    for part in _split(selector):
        if found := _SET.match(part):
            values = frozenset(v.strip() for v in found["values"].split(",") if v.strip())
            requirements.append((found["key"], found["op"], values))
        elif found := _EQ.match(part):
            op = "!=" if found["op"] == "!=" else "="
            requirements.append((found["key"], op, frozenset([found["value"]])))
        elif found := _EXISTS.match(part):
            requirements.append((found["key"], found["neg"] or "exists", frozenset()))
        else:
            raise StatusError(400, "BadRequest", f"unable to parse requirement: {part.strip()!r}")

    def matches(obj: dict[str, Any]) -> bool:
        labels = obj.get("metadata", {}).get("labels") or {}
        return all(_holds(op, key in labels, labels.get(key), values) for key, op, values in requirements)

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
    requirements: list[tuple[str, bool, str]] = []
    for part in _split(selector):
        found = _EQ.match(part)
        if found is None:
            raise StatusError(400, "BadRequest", f"invalid selector: '{selector}'; can't understand '{part}'")
        path = found["key"]
        if path not in FIELDS.get(resource, _COMMON):
            raise StatusError(400, "BadRequest", f"field label not supported: {path}")
        requirements.append((path, found["op"] != "!=", found["value"]))

    def matches(obj: dict[str, Any]) -> bool:
        return all((_field(obj, path) == value) == equal for path, equal, value in requirements)

    return matches
