"""What a Kubernetes cluster can hold, read from the cluster itself rather than a catalog.

Each schedulable, Ready node offers what is left on it: ``status.allocatable`` minus the requests of
the non-terminal pods bound to it (every namespace, so other tenants count), as the scheduler sees
it. Its GPUs (``nvidia.com/gpu``, or AMD's ``amd.com/gpu``) are named by the first of ``GPU_LABELS``
it carries, in SkyPilot's spelling; GPUs on a node without such a label are left out, since no task
could ask for them by name.
One offering per distinct free shape and context (the context is the offering's region), at price 0.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from skyhop.providers.accelerators import label_gpu_name
from skyhop.providers.base import Offering
from skyhop.providers.kubernetes.settings import KubernetesSettings

if TYPE_CHECKING:
    from skyhop.providers.kubernetes.client import ContextApi

__all__ = [
    "GPU_LABELS",
    "GPU_RESOURCES",
    "PROVIDER",
    "api_offerings",
    "cluster_offerings",
    "free_capacity",
    "gpu_resource",
    "read_offerings",
]

PROVIDER = "kubernetes"
GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu")
"""The extended resources GPUs are requested by: NVIDIA's device plugin, AMD's (ROCm)."""
GPU_LABELS = (
    "nvidia.com/gpu.product",
    "cloud.google.com/gke-accelerator",
    "skypilot.co/accelerator",
    "amd.com/gpu.product-name",
)
"""Labels naming a node's GPU type: NVIDIA's GPU feature discovery, GKE, SkyPilot's own, AMD's labeller."""


def gpu_resource(gpu: str) -> str:
    """The resource a pod asks for ``gpu`` by: AMD Instinct GPUs (``MI300``) are ``amd.com/gpu``."""
    return GPU_RESOURCES[1] if re.match(r"MI\d", gpu.upper()) else GPU_RESOURCES[0]


_TERMINAL = ("Succeeded", "Failed")

Obj = Mapping[str, Any]


def _quantity(value: object) -> Decimal:
    from kubernetes.utils.quantity import parse_quantity

    return Decimal(str(parse_quantity(value)))


def free_capacity(node: Obj, pods: list[Obj]) -> dict[str, Decimal]:
    """``status.allocatable`` minus what the node's non-terminal pods request."""
    free = {
        name: _quantity(value) for name, value in (node.get("status", {}).get("allocatable") or {}).items()
    }
    name = node["metadata"]["name"]
    for pod in pods:
        if pod.get("spec", {}).get("nodeName") != name or pod.get("status", {}).get("phase") in _TERMINAL:
            continue
        free["pods"] = free.get("pods", Decimal(0)) - 1
        for container in pod["spec"].get("containers") or []:
            for resource, value in ((container.get("resources") or {}).get("requests") or {}).items():
                free[resource] = free.get(resource, Decimal(0)) - _quantity(value)
    return free


def _schedulable(node: Obj) -> bool:
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in node.get("status", {}).get("conditions") or []
    )
    return ready and not node.get("spec", {}).get("unschedulable")


def _node_offering(node: Obj, pods: list[Obj], context: str) -> Offering | None:
    if not _schedulable(node):
        return None
    free = free_capacity(node, pods)
    cpus = math.floor(float(free.get("cpu", 0)) * 10) / 10
    memory_gib = math.floor(float(free.get("memory", 0)) / 2**30 * 10) / 10
    if cpus <= 0 or memory_gib <= 0 or free.get("pods", Decimal(1)) < 1:
        return None
    labels = node["metadata"].get("labels") or {}
    gpu = next((label_gpu_name(labels[label]) for label in GPU_LABELS if labels.get(label)), None)
    gpus = int(sum(free.get(resource, Decimal(0)) for resource in GPU_RESOURCES))
    accelerators = {gpu: float(gpus)} if gpu is not None and gpus > 0 else {}
    shape = f"{cpus:g}CPU--{memory_gib:g}GB" + "".join(f"--{n}:{c:g}" for n, c in accelerators.items())
    return Offering(
        provider=PROVIDER,
        instance_type=shape,
        cpus=cpus,
        memory_gib=memory_gib,
        accelerators=accelerators,
        region=context,
        price=0.0,
        divisible=True,
    )


def cluster_offerings(nodes: list[Obj], pods: list[Obj], context: str) -> list[Offering]:
    """The offerings of one context, from its nodes and pods as the API lists them."""
    found: dict[str, Offering] = {}
    for node in nodes:
        offering = _node_offering(node, pods, context)
        if offering is not None:
            found.setdefault(offering.instance_type, offering)
    return sorted(found.values(), key=lambda o: o.instance_type)


def api_offerings(api: ContextApi) -> list[Offering]:
    """Ask one context's cluster: two list calls."""
    nodes = api.call(api.core.list_node)["items"]
    live = "status.phase!=Succeeded,status.phase!=Failed"
    pods = api.call(api.core.list_pod_for_all_namespaces, field_selector=live)["items"]
    return cluster_offerings(nodes, pods, api.context)


def read_offerings(context: str | None = None, kubeconfig: str | None = None) -> list[Offering]:
    """Ask the cluster of ``context`` (the kubeconfig's current one if None)."""
    from skyhop.providers.kubernetes.client import open_context

    return api_offerings(open_context(KubernetesSettings(kubeconfig=kubeconfig), context))
