"""A cluster autoscaler over node groups, with the events the real one writes on the pods it looks at.

For a pod the scheduler left ``Unschedulable``: if a new node of some group (its template) would hold
it and the group is below its maximum, ``TriggeredScaleUp`` (``pod triggered scale-up: [{group 0->1
(max: 2)}]``) and the node registers ``delay`` seconds later; otherwise ``NotTriggerScaleUp`` with the
template's reasons (``pod didn't trigger scale-up: 1 Insufficient nvidia.com/gpu``). Each pod is
considered once, as one scale-up per pending pod; the real one also bin-packs pods onto one new node.
A pod annotated ``cluster-autoscaler.kubernetes.io/pod-scale-up-delay`` (a Go duration: ``600s``,
``10m``, ``1h30m``) is left alone until it is that old, as the real one does.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.fakes.kubernetes.events import record_event
from tests.fakes.kubernetes.nodes import NodeSpec
from tests.fakes.kubernetes.scheduler import node_reasons
from tests.fakes.kubernetes.status import StatusError, timestamp
from tests.fakes.kubernetes.store import Store

__all__ = ["Autoscaler", "NodeGroup"]

Obj = dict[str, Any]


@dataclass
class NodeGroup:
    """Nodes like ``template`` (named ``{name}-{n}``), up to ``max_size``, each registered ``delay``
    seconds after the scale-up that asked for it."""

    name: str
    template: NodeSpec
    max_size: int = 1
    delay: float = 1.0
    size: int = 0


DELAY_ANNOTATION = "cluster-autoscaler.kubernetes.io/pod-scale-up-delay"
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s)")
_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def _delayed(pod: Obj) -> bool:
    """Whether the pod is younger than its own scale-up delay annotation says to wait."""
    delay = (pod["metadata"].get("annotations") or {}).get(DELAY_ANNOTATION)
    if not delay:
        return False
    seconds = sum(float(n) * _UNIT_S[unit] for n, unit in _DURATION.findall(delay))
    created = datetime.datetime.fromisoformat(pod["metadata"]["creationTimestamp"].replace("Z", "+00:00"))
    return datetime.datetime.now(datetime.UTC) - created < datetime.timedelta(seconds=seconds)


def _unschedulable(pod: Obj) -> bool:
    return any(
        c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"
        for c in pod["status"].get("conditions", [])
    )


class Autoscaler:
    def __init__(self, store: Store, groups: list[NodeGroup], add_node: Callable[[NodeSpec], None]) -> None:
        self.store, self.groups, self.add_node = store, groups, add_node
        self.errors: list[str] = []
        self._seen: set[str] = set()
        self._due: list[tuple[float, NodeSpec]] = []

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            seen = self.store.revision
            try:
                self.step()
            except Exception:
                self.errors.append(traceback.format_exc())
            with self.store.lock:
                if self.store.revision == seen:
                    self.store.changed.wait(0.2)

    def step(self) -> None:
        now = time.monotonic()
        for due, spec in [d for d in self._due if d[0] <= now]:
            self._due.remove((due, spec))
            self.add_node(spec)
        pods, _ = self.store.list("pods")
        for pod in pods:
            uid = pod["metadata"]["uid"]
            if uid in self._seen or pod["spec"].get("nodeName") or not _unschedulable(pod) or _delayed(pod):
                continue
            self._seen.add(uid)
            try:
                self._consider(pod, pods)
            except StatusError:  # deleted meanwhile
                continue

    def _consider(self, pod: Obj, pods: list[Obj]) -> None:
        reasons: Counter[str] = Counter()
        for group in self.groups:
            template = group.template.object("")
            template["metadata"]["creationTimestamp"] = timestamp()
            why = node_reasons(pod, template, [])
            if not why and group.size < group.max_size:
                spec = dataclasses.replace(group.template, name=f"{group.name}-{group.size + 1}")
                change = f"{group.name} {group.size}->{group.size + 1} (max: {group.max_size})"
                message = f"pod triggered scale-up: [{{{change}}}]"
                group.size += 1
                self._due.append((time.monotonic() + group.delay, spec))
                record_event(self.store, pod, "Normal", "TriggeredScaleUp", message, "cluster-autoscaler")
                return
            for reason in why or ["max node group size reached"]:
                reasons[reason] += 1
        listed = ", ".join(f"{n} {reason}" for reason, n in sorted(reasons.items()))
        record_event(self.store, pod, "Normal", "NotTriggerScaleUp", f"pod didn't trigger scale-up: {listed}",
                     "cluster-autoscaler")  # fmt: skip
