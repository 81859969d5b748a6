"""The resources the fake serves, as discovery (``/api/v1``) describes them to kubectl and clients."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["RESOURCES", "Resource", "api_resource_list"]

_ALL_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


@dataclass(frozen=True)
class Resource:
    name: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    verbs: tuple[str, ...] = tuple(_ALL_VERBS)

    def entry(self) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "name": self.name,
            "singularName": self.kind.lower(),
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": list(self.verbs),
        }
        if self.short_names:
            entry["shortNames"] = list(self.short_names)
        if self.name in ("pods", "services", "secrets"):
            entry["categories"] = ["all"] if self.name != "secrets" else []
        return entry


RESOURCES = {
    r.name: r
    for r in (
        Resource("pods", "Pod", True, ("po",)),
        Resource("nodes", "Node", False, ("no",)),
        Resource("namespaces", "Namespace", False, ("ns",), ("create", "delete", "get", "list", "watch")),
        Resource("events", "Event", True, ("ev",)),
        Resource("services", "Service", True, ("svc",)),
        Resource("secrets", "Secret", True),
        Resource("persistentvolumeclaims", "PersistentVolumeClaim", True, ("pvc",)),
    )
}

_SUBRESOURCES = [
    {
        "name": "pods/exec",
        "singularName": "",
        "namespaced": True,
        "kind": "PodExecOptions",
        "verbs": ["create", "get"],
    },
    {"name": "pods/log", "singularName": "", "namespaced": True, "kind": "Pod", "verbs": ["get"]},
    {"name": "pods/status", "singularName": "", "namespaced": True, "kind": "Pod", "verbs": ["get"]},
    {
        "name": "pods/eviction",
        "singularName": "",
        "namespaced": True,
        "group": "policy",
        "version": "v1",
        "kind": "Eviction",
        "verbs": ["create"],
    },
]


def api_resource_list() -> dict[str, Any]:
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": "v1",
        "resources": [r.entry() for r in RESOURCES.values()] + _SUBRESOURCES,
    }
