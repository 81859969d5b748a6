"""Core v1 Events as the components' event recorders write them, repeats folded into ``count``."""

from __future__ import annotations

import time
from typing import Any

from tests.fakes.kubernetes.status import timestamp
from tests.fakes.kubernetes.store import Store

__all__ = ["record_event"]


def record_event(
    store: Store, about: dict[str, Any], kind: str, reason: str, message: str, component: str, host: str = ""
) -> None:
    """A ``Normal``/``Warning`` event on ``about`` (a pod or node) from ``component``.

    The same reason and message on the same object again bumps ``count`` and ``lastTimestamp`` of the
    existing event, as client-go's event correlator does. Named ``<object>.<unix nanoseconds in hex>``
    as recorders name them, so an object's events sort by name in the order they happened.
    """
    meta = about["metadata"]
    namespace = meta.get("namespace") or "default"
    involved = {
        "kind": about.get("kind", "Pod"),
        "namespace": meta.get("namespace", ""),
        "name": meta["name"],
        "uid": meta.get("uid", ""),
        "apiVersion": "v1",
        "resourceVersion": meta.get("resourceVersion", ""),
    }
    now = timestamp()
    with store.lock:
        events, _ = store.list("events", namespace)
        for event in events:
            same = event["involvedObject"].get("uid") == involved["uid"]
            if same and event["reason"] == reason and event["message"] == message:

                def again(target: dict[str, Any]) -> None:
                    target["count"] = target.get("count", 1) + 1
                    target["lastTimestamp"] = now

                store.update("events", namespace, event["metadata"]["name"], again)
                return
        source = {"component": component, **({"host": host} if host else {})}
        store.create(
            "events",
            namespace,
            {
                "metadata": {"name": f"{meta['name']}.{time.time_ns():x}", "namespace": namespace},
                "involvedObject": involved,
                "reason": reason,
                "message": message,
                "source": source,
                "firstTimestamp": now,
                "lastTimestamp": now,
                "count": 1,
                "type": kind,
                "eventTime": None,
                "reportingComponent": component,
                "reportingInstance": host or component,
            },
        )
