"""The default scheduler's filters and its messages: a pending pod is bound to a node where it fits, or
gets ``PodScheduled=False`` (``Unschedulable``) and a ``FailedScheduling`` event that counts the reasons.

Filters run per node in the default profile's order, the first that fails gives the node's reason:
``spec.unschedulable`` (cordon), taints without a toleration, ``nodeSelector`` and required node
affinity, then resources: ``cpu``, ``memory``, ``nvidia.com/gpu`` and ``pods`` requested by the
non-terminal pods bound to the node, against ``status.allocatable``. Among fitting nodes the least
allocated wins (name breaks ties). An unschedulable pod is tried again when nodes or bound pods
change, as the real scheduler's queue moves it back on cluster events.
"""

from __future__ import annotations

import threading
import traceback
from collections import Counter
from fractions import Fraction
from typing import Any

from tests.fakes.kubernetes.events import record_event
from tests.fakes.kubernetes.quantity import parse_quantity
from tests.fakes.kubernetes.status import StatusError, timestamp
from tests.fakes.kubernetes.store import Store

__all__ = ["Scheduler", "free_resources", "node_reasons", "pod_requests", "unschedulable_message"]

Obj = dict[str, Any]
_TERMINAL = ("Succeeded", "Failed")
_NOT_HELPFUL = "Preemption is not helpful for scheduling"
_NO_VICTIMS = "No preemption victims found for incoming pod"


def pod_requests(pod: Obj) -> dict[str, Fraction]:
    total: dict[str, Fraction] = {"pods": Fraction(1)}
    for container in pod.get("spec", {}).get("containers", []):
        for resource, value in ((container.get("resources") or {}).get("requests") or {}).items():
            total[resource] = total.get(resource, Fraction(0)) + parse_quantity(value)
    return total


def free_resources(node: Obj, pods: list[Obj]) -> dict[str, Fraction]:
    """Allocatable minus what the node's non-terminal pods request."""
    free = {r: parse_quantity(v) for r, v in (node.get("status", {}).get("allocatable") or {}).items()}
    name = node["metadata"]["name"]
    for pod in pods:
        if pod["spec"].get("nodeName") == name and pod.get("status", {}).get("phase") not in _TERMINAL:
            for resource, amount in pod_requests(pod).items():
                free[resource] = free.get(resource, Fraction(0)) - amount
    return free


def _tolerated(taint: Obj, tolerations: list[Obj]) -> bool:
    for toleration in tolerations:
        if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
            continue
        if toleration.get("operator") == "Exists":
            if not toleration.get("key") or toleration["key"] == taint.get("key"):
                return True
        elif toleration.get("key") == taint.get("key") and toleration.get("value", "") == taint.get(
            "value", ""
        ):
            return True
    return False


def _term_matches(term: Obj, labels: dict[str, str]) -> bool:
    for expression in term.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
        ok = {
            "In": labels.get(key) in values,
            "NotIn": labels.get(key) not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }.get(operator, False)
        if not ok:
            return False
    return True


def node_reasons(pod: Obj, node: Obj, pods: list[Obj]) -> list[str]:
    """Why ``pod`` cannot go to ``node`` (empty: it fits)."""
    spec, node_spec = pod["spec"], node.get("spec") or {}
    labels = node["metadata"].get("labels") or {}
    if node_spec.get("unschedulable"):
        return ["node(s) were unschedulable"]
    for taint in node_spec.get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not _tolerated(
            taint, spec.get("tolerations") or []
        ):
            return [f"node(s) had untolerated taint {{{taint['key']}: {taint.get('value', '')}}}"]
    selector = spec.get("nodeSelector") or {}
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms") or []
    if any(labels.get(k) != v for k, v in selector.items()) or (
        terms and not any(_term_matches(t, labels) for t in terms)
    ):
        return ["node(s) didn't match Pod's node affinity/selector"]
    free = free_resources(node, pods)
    short = [r for r, amount in pod_requests(pod).items() if amount > 0 and free.get(r, Fraction(0)) < amount]
    return ["Too many pods" if r == "pods" else f"Insufficient {r}" for r in sorted(short)]


def _load(node: Obj, pods: list[Obj]) -> Fraction:
    allocatable = {r: parse_quantity(v) for r, v in (node.get("status", {}).get("allocatable") or {}).items()}
    free = free_resources(node, pods)
    used = [1 - free[r] / allocatable[r] for r in ("cpu", "memory") if allocatable.get(r)]
    return sum(used, Fraction(0)) / max(len(used), 1)


def unschedulable_message(reasons: list[list[str]]) -> str:
    if not reasons:
        return "no nodes available to schedule pods"
    count = len(reasons)
    tally = Counter(reason for node in reasons for reason in node)
    preemption = Counter(
        _NO_VICTIMS if all(r.startswith(("Insufficient", "Too many")) for r in node) else _NOT_HELPFUL
        for node in reasons
    )
    listed = ", ".join(f"{n} {reason}" for reason, n in sorted(tally.items()))
    victims = ", ".join(f"{n} {reason}" for reason, n in sorted(preemption.items()))
    return f"0/{count} nodes are available: {listed}. preemption: 0/{count} nodes are available: {victims}."


class Scheduler:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.errors: list[str] = []
        """Tracebacks of scheduling passes that failed (the loop goes on; the fixture fails on any)."""
        self._tried: dict[str, tuple[Any, ...]] = {}
        """Pod uid -> the cluster state its last failed attempt saw."""

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            seen = self.store.revision
            try:
                self.schedule()
            except Exception:
                self.errors.append(traceback.format_exc())
            with self.store.lock:
                if self.store.revision == seen:
                    self.store.changed.wait(0.5)

    def schedule(self) -> None:
        with self.store.lock:
            pods, _ = self.store.list("pods")
            nodes, _ = self.store.list("nodes")
        pending = [
            p
            for p in pods
            if not p["spec"].get("nodeName")
            and p["spec"].get("schedulerName") == "default-scheduler"
            and not p["metadata"].get("deletionTimestamp")
            and p["status"].get("phase") == "Pending"
        ]
        pending.sort(key=lambda p: (p["metadata"]["creationTimestamp"], p["metadata"]["name"]))
        for pod in pending:
            bound = tuple(
                (p["metadata"]["uid"], p["spec"].get("nodeName"), p["status"].get("phase"))
                for p in pods
                if p["spec"].get("nodeName")
            )
            state = (tuple(n["metadata"]["resourceVersion"] for n in nodes), bound)
            uid = pod["metadata"]["uid"]
            if self._tried.get(uid) == state:
                continue
            reasons = [node_reasons(pod, node, pods) for node in nodes]
            fits = [node for node, why in zip(nodes, reasons, strict=True) if not why]
            try:
                if fits:
                    node = min(fits, key=lambda n: (_load(n, pods), n["metadata"]["name"]))
                    self._tried.pop(uid, None)
                    pods = [p for p in pods if p["metadata"]["uid"] != uid] + [self._bind(pod, node)]
                else:
                    self._tried[uid] = state
                    self._refuse(pod, unschedulable_message(reasons))
            except StatusError:  # deleted meanwhile
                continue

    def _bind(self, pod: Obj, node: Obj) -> Obj:
        name, namespace, target = (
            pod["metadata"]["name"],
            pod["metadata"]["namespace"],
            node["metadata"]["name"],
        )

        def bind(obj: Obj) -> None:
            obj["spec"]["nodeName"] = target
            conditions = [c for c in obj["status"].get("conditions", []) if c["type"] != "PodScheduled"]
            scheduled = {
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": timestamp(),
            }
            obj["status"]["conditions"] = [*conditions, scheduled]

        bound = self.store.update("pods", namespace, name, bind)
        message = f"Successfully assigned {namespace}/{name} to {target}"
        record_event(self.store, bound, "Normal", "Scheduled", message, "default-scheduler")
        return bound

    def _refuse(self, pod: Obj, message: str) -> None:
        def refuse(obj: Obj) -> None:
            conditions = [c for c in obj["status"].get("conditions", []) if c["type"] != "PodScheduled"]
            old = next((c for c in obj["status"].get("conditions", []) if c["type"] == "PodScheduled"), None)
            refused = {
                "type": "PodScheduled",
                "status": "False",
                "lastProbeTime": None,
                "lastTransitionTime": old["lastTransitionTime"] if old else timestamp(),
                "reason": "Unschedulable",
                "message": message,
            }
            obj["status"]["conditions"] = [*conditions, refused]

        refused = self.store.update("pods", pod["metadata"]["namespace"], pod["metadata"]["name"], refuse)
        record_event(self.store, refused, "Warning", "FailedScheduling", message, "default-scheduler")
