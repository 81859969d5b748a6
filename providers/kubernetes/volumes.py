"""Volumes on Kubernetes: PersistentVolumeClaims, labelled, are the only record of them.

A volume is the PVC of its name in the context's namespace (the one skyhop's pods go in, so its
pods can mount it), labelled ``skyhop.dev/volume=<name>``. One skyhop created also carries
``app.kubernetes.io/managed-by: skyhop``; a PVC that was there already and was taken with
``use_existing: true`` gets only the volume label, and ``delete`` takes that label off again,
leaving the PVC. No database: ``ls`` lists the labelled PVCs of every allowed context, and a launch
finds its volumes the same way, so any machine sees the same volumes.

Who uses a volume is read from the pods: a pod (not ended) whose spec mounts the claim. ``delete``
is refused while one does, naming its cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from skyhop.providers.errors import InvalidRequestError, ProviderError
from skyhop.providers.kubernetes.client import ContextApi
from skyhop.providers.kubernetes.pods import CLUSTER_LABEL, MANAGED_BY
from skyhop.spec.volume import AccessMode, VolumeSpec

__all__ = [
    "VOLUME_LABEL",
    "VolumeError",
    "VolumeRecord",
    "apply_volume",
    "delete_volume",
    "list_volumes",
    "volume_selector",
]

Obj = Mapping[str, Any]
VOLUME_LABEL = "skyhop.dev/volume"
_ENDED = ("Succeeded", "Failed")


class VolumeError(ValueError):
    """A volume cannot be applied or deleted as asked; the message names it and why."""


@dataclass(frozen=True)
class VolumeRecord:
    """One volume as its PVC says, and the clusters whose pods mount it now."""

    name: str
    context: str
    namespace: str
    size: str
    access_mode: str
    storage_class: str | None
    status: str
    """The PVC's phase: Pending, Bound or Lost."""
    created_by_skyhop: bool
    users: tuple[str, ...]
    """Clusters (a pod's ``skyhop.dev/cluster``, else the pod's name) whose pods mount it."""

    @property
    def one_node(self) -> bool:
        """Whether only one node may mount it (ReadWriteOnce, ReadWriteOncePod)."""
        return self.access_mode in (AccessMode.READ_WRITE_ONCE, AccessMode.READ_WRITE_ONCE_POD)


def volume_selector(name: str | None = None) -> str:
    """The label selector of every volume, or of the one named ``name``."""
    return f"{VOLUME_LABEL}={name}" if name else VOLUME_LABEL


def claim_manifest(spec: VolumeSpec) -> dict[str, Any]:
    """The PVC a volume file asks for; skyhop's labels win over the file's."""
    claim_spec: dict[str, Any] = {
        "accessModes": [spec.config.access_mode.value],
        "resources": {"requests": {"storage": spec.size}},
    }
    if spec.config.storage_class_name:
        claim_spec["storageClassName"] = spec.config.storage_class_name
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": spec.name, "labels": {**spec.labels, VOLUME_LABEL: spec.name, **MANAGED_BY}},
        "spec": claim_spec,
    }


def _ours(claim: Obj) -> bool:
    labels = claim["metadata"].get("labels") or {}
    return all(labels.get(k) == v for k, v in MANAGED_BY.items())


def _same(claim: Obj, wanted: Obj) -> str | None:
    """What of ``wanted`` the existing ``claim`` differs in (None: it is that volume)."""
    have, want = claim.get("spec") or {}, wanted["spec"]
    size = ((have.get("resources") or {}).get("requests") or {}).get("storage")
    if size != want["resources"]["requests"]["storage"]:
        return f"size {size} (asked {want['resources']['requests']['storage']})"
    if have.get("accessModes") != want["accessModes"]:
        return f"access modes {have.get('accessModes')} (asked {want['accessModes']})"
    if "storageClassName" in want and have.get("storageClassName") != want["storageClassName"]:
        return f"storage class {have.get('storageClassName')} (asked {want['storageClassName']})"
    return None


def apply_volume(api: ContextApi, spec: VolumeSpec) -> str:
    """Make the volume exist as ``spec`` says; returns what was done, in words.

    A create that meets ``AlreadyExists`` (a retry, or an apply run twice) reads the claim: the same
    volume is a no-op, a different one or a PVC skyhop did not make is refused (``VolumeError``)
    unless ``use_existing``, which labels the PVC as the volume and changes nothing else.
    """
    where = f"kubernetes context {api.context!r}, namespace {api.namespace!r}"
    if spec.use_existing:
        claim = _read(api, spec.name)
        if claim is None:
            raise VolumeError(f"volume {spec.name!r}: use_existing, but {where} has no PVC {spec.name!r}")
        if (claim["metadata"].get("labels") or {}).get(VOLUME_LABEL) == spec.name:
            return f"volume {spec.name!r} already uses PVC {spec.name!r} ({where})"
        patch = {"metadata": {"labels": {VOLUME_LABEL: spec.name}}}
        api.call(api.core.patch_namespaced_persistent_volume_claim, spec.name, api.namespace, patch)
        return f"volume {spec.name!r} now uses the existing PVC {spec.name!r} ({where})"
    wanted = claim_manifest(spec)
    try:
        api.call(api.core.create_namespaced_persistent_volume_claim, api.namespace, wanted)
        return f"created volume {spec.name!r}: PVC {spec.name!r} of {spec.size} ({where})"
    except InvalidRequestError as exc:
        if exc.code != "AlreadyExists":
            raise
    claim = _read(api, spec.name)
    if claim is None:
        raise VolumeError(f"volume {spec.name!r}: its PVC was deleted while it was applied; apply again")
    if not _ours(claim):
        raise VolumeError(
            f"volume {spec.name!r}: {where} already has a PVC {spec.name!r} that skyhop did not create; "
            "add use_existing: true to use it, or choose another name"
        )
    differs = _same(claim, wanted)
    if differs is not None:
        raise VolumeError(
            f"volume {spec.name!r} exists with {differs}; delete it first (skyhop volumes delete "
            f"{spec.name}) to change it"
        )
    return f"volume {spec.name!r} is already there as asked ({where})"


def _read(api: ContextApi, name: str) -> Obj | None:
    try:
        claim: Obj = api.call(api.core.read_namespaced_persistent_volume_claim, name, api.namespace)
    except ProviderError as exc:
        if exc.code == "NotFound":
            return None
        raise
    return claim


def _users(api: ContextApi) -> dict[str, list[str]]:
    """``claim name -> clusters`` whose live pods in the namespace mount it."""
    live = "status.phase!=Succeeded,status.phase!=Failed"
    pods = api.call(api.core.list_namespaced_pod, api.namespace, field_selector=live)["items"]
    users: dict[str, list[str]] = {}
    for pod in pods:
        labels = pod["metadata"].get("labels") or {}
        who = labels.get(CLUSTER_LABEL) or pod["metadata"]["name"]
        for volume in (pod.get("spec") or {}).get("volumes") or []:
            claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
            if claim and who not in users.setdefault(claim, []):
                users[claim].append(who)
    return users


def _record(api: ContextApi, claim: Obj, users: dict[str, list[str]]) -> VolumeRecord:
    meta, spec = claim["metadata"], claim.get("spec") or {}
    name = str(meta["labels"][VOLUME_LABEL])
    return VolumeRecord(
        name=name,
        context=api.context,
        namespace=api.namespace,
        size=str(((spec.get("resources") or {}).get("requests") or {}).get("storage", "")),
        access_mode=str((spec.get("accessModes") or [""])[0]),
        storage_class=spec.get("storageClassName"),
        status=str((claim.get("status") or {}).get("phase") or "Pending"),
        created_by_skyhop=_ours(claim),
        users=tuple(users.get(meta["name"], [])),
    )


def list_volumes(api: ContextApi, name: str | None = None) -> list[VolumeRecord]:
    """The context's volumes (or the one named ``name``), by name, each with its users."""
    claims = api.call(
        api.core.list_namespaced_persistent_volume_claim, api.namespace, label_selector=volume_selector(name)
    )["items"]
    users = _users(api) if claims else {}
    return sorted((_record(api, claim, users) for claim in claims), key=lambda r: r.name)


def delete_volume(api: ContextApi, name: str) -> str:
    """Delete the volume's PVC (or, for a PVC skyhop did not create, forget it: its volume label
    is taken off, the PVC and its data stay); refused while a pod mounts it. Returns what was done."""
    found = list_volumes(api, name)
    if not found:
        raise VolumeError(f"volume {name!r}: not found in kubernetes context {api.context!r}")
    volume = found[0]
    if volume.users:
        raise VolumeError(
            f"volume {name!r} is in use by cluster {', '.join(volume.users)}; skyhop down it first"
        )
    if not volume.created_by_skyhop:
        patch = {"metadata": {"labels": {VOLUME_LABEL: None}}}
        api.call(api.core.patch_namespaced_persistent_volume_claim, name, api.namespace, patch)
        return f"forgot volume {name!r}: its PVC was not created by skyhop and is left as it is"
    try:
        api.call(api.core.delete_namespaced_persistent_volume_claim, name, api.namespace)
    except ProviderError as exc:
        if exc.code != "NotFound":  # a retried delete: the first one did it
            raise
    return f"deleted volume {name!r} (PVC {name!r} in kubernetes context {api.context!r})"
