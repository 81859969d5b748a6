"""A cluster's pods: what skyhop asks the API server for, and what their status says.

One pod per node, named ``<cluster>-<rank>`` (a retried create meets ``AlreadyExists`` instead of
making a second pod) and labelled with the cluster and rank, so every later call finds them by
label. Each asks for the task's own CPUs, memory and GPUs (``NodeRequest``) as requests and limits,
so two 1-GPU tasks share a 2-GPU machine; what the task leaves open gets SkyPilot's Kubernetes
defaults (2 CPUs, 1 GiB per CPU; 4 CPUs, 4 GiB per CPU beside a GPU), never more than the offering
(the machine's free shape the optimizer chose). A GPU pod is kept to the nodes whose GPU-type label names the
GPU asked for (``GPU_LABELS``, the labels the offerings were read from).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any

from skyhop.providers.accelerators import label_gpu_name
from skyhop.providers.base import NodeRequest, Offering
from skyhop.providers.kubernetes.client import NODE_CONTAINER
from skyhop.providers.kubernetes.offerings import GPU_LABELS, gpu_resource
from skyhop.providers.naming import fit_name
from skyhop.providers.overrides import KubernetesOverrides
from skyhop.providers.pod_run_options import pod_options

__all__ = [
    "CLUSTER_LABEL",
    "MANAGED_BY",
    "NO_SCALE_UP",
    "RANK_LABEL",
    "PodState",
    "cluster_selector",
    "gpu_node_terms",
    "merge_pod_config",
    "pod_manifest",
    "pod_name",
    "pod_state",
]

Obj = Mapping[str, Any]
CLUSTER_LABEL = "skyhop.dev/cluster"
RANK_LABEL = "skyhop.dev/rank"
MANAGED_BY = {"app.kubernetes.io/managed-by": "skyhop"}
_GRACE_S = 5
"""Seconds a deleted pod's processes get after SIGTERM: jobs are already cancelled by then."""
NO_SCALE_UP = {"cluster-autoscaler.kubernetes.io/pod-scale-up-delay": "3600s"}
"""The cluster autoscaler leaves a pending pod this young alone: a pod the launch will not wait
for (it is deleted once unschedulable) must not make the cluster add a node anyway."""
_IMAGE_ERRORS = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull")


def pod_name(cluster_name: str, rank: int) -> str:
    """The pod of node ``rank``: a DNS label (at most 63 characters), the same on every retry."""
    return fit_name(cluster_name, 63, f"-{rank}")


def cluster_selector(cluster_name: str) -> str:
    """The label selector of every pod of the cluster."""
    return f"{CLUSTER_LABEL}={cluster_name}"


def gpu_node_terms(nodes: list[Obj], gpu: str) -> list[dict[str, Any]]:
    """Node selector terms for the nodes whose GPU label names ``gpu`` (any of the labels' spellings)."""
    values: dict[str, set[str]] = {}
    for node in nodes:
        labels = node["metadata"].get("labels") or {}
        key = next((label for label in GPU_LABELS if labels.get(label)), None)
        if key is not None and label_gpu_name(labels[key]).upper() == gpu.upper():
            values.setdefault(key, set()).add(labels[key])
    return [
        {"matchExpressions": [{"key": key, "operator": "In", "values": sorted(found)}]}
        for key, found in sorted(values.items())
    ]


_DEFAULT_CPUS = {False: 2.0, True: 4.0}
"""vCPUs of a pod whose task leaves ``cpus`` open, without and with GPUs (SkyPilot's defaults)."""
_DEFAULT_GIB_PER_CPU = {False: 1.0, True: 4.0}


def _quantities(offering: Offering, ask: NodeRequest | None) -> dict[str, str]:
    if ask is None:  # nothing known of the task: the node is the whole offering
        cpus, memory, gpus = offering.cpus, offering.memory_gib, sum(offering.accelerators.values())
    else:
        gpus = sum(ask.accelerators.values())
        cpus = min(ask.cpus or _DEFAULT_CPUS[gpus > 0], offering.cpus)
        per_cpu = ask.memory_per_cpu or _DEFAULT_GIB_PER_CPU[gpus > 0]
        memory = min(ask.memory_gib or per_cpu * cpus, offering.memory_gib)
    amounts = {"cpu": f"{int(cpus * 1000)}m", "memory": f"{int(memory * 1024)}Mi"}
    if gpus:
        amounts[gpu_resource(next(iter(offering.accelerators), ""))] = str(int(gpus))
    return amounts


def pod_manifest(
    cluster_name: str,
    rank: int,
    offering: Offering,
    ask: NodeRequest | None,
    image: str,
    gpu_terms: list[dict[str, Any]],
    *,
    scale_up: bool = False,
    labels: dict[str, str] | None = None,
    disk_gib: int | None = None,
    priority_class: str | None = None,
    volumes: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The pod of node ``rank``: the task's resources, on a node with the offering's GPU type;
    ``scale_up``: a cluster autoscaler may add a node for it (else ``NO_SCALE_UP``); ``labels``:
    the task's ``resources.labels`` (skyhop's own win, so a pod is always found by its cluster);
    ``disk_gib``: the task's ``disk_size``, requested as ephemeral storage, so the pod lands only
    on a node with that much local disk free (a request, not a limit: a job writing more is not
    evicted, as a VM's disk is not taken away); ``priority_class``: the task's
    ``resources.priority_class`` (the cluster's PriorityClass that ranks the pod for preemption);
    ``volumes``: mount path -> the PVC mounted there (``volumes.py``)."""
    amounts = _quantities(offering, ask)
    disk = {"ephemeral-storage": f"{disk_gib}Gi"} if disk_gib else {}
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": _GRACE_S,
        "containers": [
            {
                "name": NODE_CONTAINER,
                "image": image,
                "command": ["sleep", "infinity"],
                "resources": {"requests": {**amounts, **disk}, "limits": dict(amounts)},
            }
        ],
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    if volumes:
        spec["volumes"], spec["containers"][0]["volumeMounts"] = _claim_mounts(volumes)
    if gpu_terms:
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": gpu_terms}
            }
        }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name(cluster_name, rank),
            "labels": {**(labels or {}), CLUSTER_LABEL: cluster_name, RANK_LABEL: str(rank), **MANAGED_BY},
            "annotations": {} if scale_up else dict(NO_SCALE_UP),
        },
        "spec": spec,
    }


def merge_pod_config(
    manifest: Obj, overrides: KubernetesOverrides, docker_arguments: Sequence[str] = ()
) -> dict[str, Any]:
    """``manifest`` with the task's ``pod_config`` and ``custom_metadata`` merged in, as SkyPilot
    merges them into its pods: mappings key by key, ``containers`` by position (the first is the
    node's), other lists appended (tolerations, volumes, env, ...) but ``command`` and ``args``.
    Where both set one value, skyhop's wins: the pod keeps its name, labels, command and resources,
    so it is still found by its cluster and sized as planned. ``docker_arguments`` (the task's
    ``config.docker.run_options``) add the parts of the pod they amount to (``pod_run_options``)."""
    extra: dict[str, Any] = _merged(
        dict(overrides.pod_config), pod_options(list(docker_arguments)).pod_config
    )
    if overrides.custom_metadata:
        extra = _merged({"metadata": overrides.custom_metadata}, extra)
    merged: dict[str, Any] = _merged(manifest, extra)
    return merged


_WHOLE_LISTS = ("command", "args")
"""Lists that are one value, not items to add to: the node's command keeps the pod alive."""


def _merged(ours: Any, theirs: Any, key: str = "") -> Any:
    if isinstance(ours, Mapping) and isinstance(theirs, Mapping):
        merged = {**theirs, **ours}
        for both in ours.keys() & theirs.keys():
            merged[both] = _merged(ours[both], theirs[both], both)
        return merged
    if isinstance(ours, list) and isinstance(theirs, list):
        if key in _WHOLE_LISTS:
            return ours
        if key != "containers":
            return [*ours, *theirs]
        paired = [_merged(mine, other) for mine, other in zip(ours, theirs, strict=False)]
        return paired + ours[len(paired) :] + theirs[len(paired) :]
    return ours


def _claim_mounts(volumes: dict[str, str]) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """The pod's ``volumes`` (one per PVC) and the container's ``volumeMounts`` (one per path)."""
    names = {claim: f"volume-{index}" for index, claim in enumerate(dict.fromkeys(volumes.values()))}
    pod_volumes = [{"name": name, "persistentVolumeClaim": {"claimName": c}} for c, name in names.items()]
    mounts = [{"name": names[claim], "mountPath": path} for path, claim in volumes.items()]
    return pod_volumes, mounts


class PodState(StrEnum):
    """Where a pod is on its way to running a node, as its status tells."""

    WAITING = "waiting"
    """Scheduled or being scheduled; its containers are not running yet."""
    UNSCHEDULABLE = "unschedulable"
    """The scheduler found no node for it (the FailedScheduling event's condition)."""
    BAD_IMAGE = "bad image"
    RUNNING = "running"
    ENDED = "ended"
    """It stopped (its container exited, it was evicted or OOM-killed) or is being deleted."""


def pod_state(pod: Obj) -> tuple[PodState, str]:
    """The pod's state, and the status's own words for it (the scheduler's or kubelet's message)."""
    status = pod.get("status") or {}
    if pod["metadata"].get("deletionTimestamp"):
        return PodState.ENDED, "it is being deleted"
    if status.get("phase") in ("Succeeded", "Failed"):
        reason = status.get("reason") or _container_end(status) or status["phase"]
        return PodState.ENDED, f"{reason}: {status.get('message', '')}".rstrip(": ")
    for container in status.get("containerStatuses") or []:
        waiting = (container.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in _IMAGE_ERRORS:
            return PodState.BAD_IMAGE, f"{waiting['reason']}: {waiting.get('message', '')}".rstrip(": ")
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    scheduled = conditions.get("PodScheduled") or {}
    if scheduled.get("status") == "False" and scheduled.get("reason") == "Unschedulable":
        return PodState.UNSCHEDULABLE, str(scheduled.get("message") or "no node fits")
    if status.get("phase") == "Running" and (conditions.get("Ready") or {}).get("status") == "True":
        return PodState.RUNNING, ""
    return PodState.WAITING, ""


def _container_end(status: Obj) -> str | None:
    for container in status.get("containerStatuses") or []:
        terminated = (container.get("state") or {}).get("terminated")
        if terminated:
            return str(terminated.get("reason") or f"exit code {terminated.get('exitCode')}")
    return None
