"""Server-side printing: ``meta.k8s.io/v1`` Tables, which ``kubectl get`` asks for, with its columns.

Each resource has the API server's columns (the pod's STATUS as kubectl's printer derives it).
"""

from __future__ import annotations

import calendar
import time
from collections.abc import Callable
from typing import Any

__all__ = ["wants_table", "table"]

Obj = dict[str, Any]


def wants_table(accept: str) -> bool:
    return "as=Table" in accept


def _age(created: str) -> str:
    seconds = int(time.time() - calendar.timegm(time.strptime(created, "%Y-%m-%dT%H:%M:%SZ")))
    if seconds < 0:
        return "0s"
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    return (
        f"{hours}h{minutes % 60}m"
        if hours < 8 and minutes % 60
        else f"{hours}h"
        if hours < 48
        else f"{hours // 24}d"
    )


def pod_status(pod: Obj) -> str:
    """The STATUS column, as kubectl's printer derives it from phase and container states."""
    status = pod.get("status", {})
    reason = status.get("reason") or status.get("phase", "Pending")
    running = False
    for container in reversed(status.get("containerStatuses") or []):
        state = container.get("state", {})
        if state.get("waiting", {}).get("reason"):
            reason = state["waiting"]["reason"]
        elif "terminated" in state:
            terminated = state["terminated"]
            reason = terminated.get("reason") or f"ExitCode:{terminated.get('exitCode')}"
        elif container.get("ready") and "running" in state:
            running = True
    if reason == "Completed" and running:
        reason = "Running"
    if pod["metadata"].get("deletionTimestamp"):
        reason = "Terminating"
    return str(reason)


def _pod_cells(pod: Obj) -> list[Any]:
    statuses = pod.get("status", {}).get("containerStatuses") or []
    ready = sum(1 for c in statuses if c.get("ready"))
    restarts = sum(c.get("restartCount", 0) for c in statuses)
    return [
        pod["metadata"]["name"],
        f"{ready}/{len(pod['spec'].get('containers', []))}",
        pod_status(pod),
        restarts,
        _age(pod["metadata"]["creationTimestamp"]),
        pod.get("status", {}).get("podIP") or "<none>",
        pod["spec"].get("nodeName") or "<none>",
        "<none>",
        "<none>",
    ]


def _node_cells(node: Obj) -> list[Any]:
    ready: Obj = next((c for c in node["status"].get("conditions", []) if c["type"] == "Ready"), {})
    state = "Ready" if ready.get("status") == "True" else "NotReady"
    if node.get("spec", {}).get("unschedulable"):
        state += ",SchedulingDisabled"
    roles = [
        k.split("/", 1)[1]
        for k in node["metadata"].get("labels", {})
        if k.startswith("node-role.kubernetes.io/")
    ]
    info = node["status"].get("nodeInfo", {})
    internal = next(
        (a["address"] for a in node["status"].get("addresses", []) if a["type"] == "InternalIP"), "<none>"
    )
    return [
        node["metadata"]["name"],
        state,
        ",".join(roles) or "<none>",
        _age(node["metadata"]["creationTimestamp"]),
        info.get("kubeletVersion", ""),
        internal,
        "<none>",
        info.get("osImage", ""),
        info.get("kernelVersion", ""),
        info.get("containerRuntimeVersion", ""),
    ]


def _service_cells(service: Obj) -> list[Any]:
    spec = service.get("spec", {})
    ports = ",".join(
        f"{p['port']}{':' + str(p['nodePort']) if p.get('nodePort') else ''}/{p.get('protocol', 'TCP')}"
        for p in spec.get("ports") or []
    )
    selector = ",".join(f"{k}={v}" for k, v in sorted((spec.get("selector") or {}).items()))
    return [
        service["metadata"]["name"],
        spec.get("type", "ClusterIP"),
        spec.get("clusterIP", "<none>"),
        "<none>",
        ports or "<none>",
        _age(service["metadata"]["creationTimestamp"]),
        selector or "<none>",
    ]


def _event_cells(event: Obj) -> list[Any]:
    involved = event.get("involvedObject", {})
    return [
        _age(event.get("lastTimestamp") or event["metadata"]["creationTimestamp"]),
        event.get("type", ""),
        event.get("reason", ""),
        f"{involved.get('kind', '').lower()}/{involved.get('name', '')}",
        event.get("message", ""),
    ]


def _secret_cells(secret: Obj) -> list[Any]:
    meta = secret["metadata"]
    return [
        meta["name"],
        secret.get("type", "Opaque"),
        len(secret.get("data") or {}),
        _age(meta["creationTimestamp"]),
    ]


def _namespace_cells(namespace: Obj) -> list[Any]:
    meta = namespace["metadata"]
    return [meta["name"], namespace.get("status", {}).get("phase", "Active"), _age(meta["creationTimestamp"])]


def _columns(*names: tuple[str, str, int]) -> list[Obj]:
    return [
        {"name": n, "type": t, "format": "name" if n == "Name" else "", "description": "", "priority": p}
        for n, t, p in names
    ]


_PODS = _columns(
    ("Name", "string", 0),
    ("Ready", "string", 0),
    ("Status", "string", 0),
    ("Restarts", "string", 0),
    ("Age", "string", 0),
    ("IP", "string", 1),
    ("Node", "string", 1),
    ("Nominated Node", "string", 1),
    ("Readiness Gates", "string", 1),
)
_NODES = _columns(
    ("Name", "string", 0),
    ("Status", "string", 0),
    ("Roles", "string", 0),
    ("Age", "string", 0),
    ("Version", "string", 0),
    ("Internal-IP", "string", 1),
    ("External-IP", "string", 1),
    ("OS-Image", "string", 1),
    ("Kernel-Version", "string", 1),
    ("Container-Runtime", "string", 1),
)
_SERVICES = _columns(
    ("Name", "string", 0),
    ("Type", "string", 0),
    ("Cluster-IP", "string", 0),
    ("External-IP", "string", 0),
    ("Port(s)", "string", 0),
    ("Age", "string", 0),
    ("Selector", "string", 1),
)
_EVENTS = _columns(
    ("Last Seen", "string", 0),
    ("Type", "string", 0),
    ("Reason", "string", 0),
    ("Object", "string", 0),
    ("Message", "string", 0),
)
_SECRETS = _columns(
    ("Name", "string", 0), ("Type", "string", 0), ("Data", "integer", 0), ("Age", "string", 0)
)
_NAMESPACES = _columns(("Name", "string", 0), ("Status", "string", 0), ("Age", "string", 0))
_CLAIMS = _columns(
    ("Name", "string", 0),
    ("Status", "string", 0),
    ("Volume", "string", 0),
    ("Capacity", "string", 0),
    ("Access Modes", "string", 0),
    ("StorageClass", "string", 0),
    ("Age", "string", 0),
)


def _claim_cells(claim: Obj) -> list[Any]:
    spec, status = claim.get("spec", {}), claim.get("status", {})
    modes = {
        "ReadWriteOnce": "RWO",
        "ReadOnlyMany": "ROX",
        "ReadWriteMany": "RWX",
        "ReadWriteOncePod": "RWOP",
    }
    return [
        claim["metadata"]["name"],
        status.get("phase", "Pending"),
        spec.get("volumeName", ""),
        (status.get("capacity") or {}).get("storage", ""),
        ",".join(modes.get(m, m) for m in status.get("accessModes") or []),
        spec.get("storageClassName") or "<unset>",
        _age(claim["metadata"]["creationTimestamp"]),
    ]


_PRINTERS: dict[str, tuple[list[Obj], Callable[[Obj], list[Any]]]] = {
    "pods": (_PODS, _pod_cells),
    "nodes": (_NODES, _node_cells),
    "services": (_SERVICES, _service_cells),
    "events": (_EVENTS, _event_cells),
    "secrets": (_SECRETS, _secret_cells),
    "namespaces": (_NAMESPACES, _namespace_cells),
    "persistentvolumeclaims": (_CLAIMS, _claim_cells),
}


def table(resource: str, items: list[Obj], revision: str) -> Obj:
    columns, cells = _PRINTERS[resource]
    rows = [
        {
            "cells": cells(item),
            "object": {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": item["metadata"],
            },
        }
        for item in items
    ]
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": revision},
        "columnDefinitions": columns,
        "rows": rows,
    }
