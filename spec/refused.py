"""SkyPilot task fields skyhop refuses, each with what skyhop does instead, and clouds it lacks.

A field skyhop cannot act on is refused by name before anything starts, never ignored: a task
that asks for a priority or a container must not run as if it had not. Alternatives
(``any_of``/``ordered`` items) naming a cloud of SkyPilot's that skyhop has no provider for are
skipped, as a disabled cloud is; only when none is left is the task refused (``MissingCloudError``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from skyhop.providers.registry import all_provider_names, canonical_name
from skyhop.spec.errors import SpecError

__all__ = [
    "CONFIG_ACTED_ON",
    "CONFIG_INERT",
    "NO_QUEUED_RESOURCES",
    "NO_TPU_NODES",
    "CONFIG_KEYS_REFUSED",
    "CONFIG_REFUSED",
    "RESOURCES_REFUSED",
    "SKYPILOT_CLOUDS",
    "TASK_REFUSED",
    "MissingCloudError",
    "check_refused",
    "check_store_clouds",
    "drop_missing_clouds",
]

_NO_CONTAINERS = (
    "skyhop runs image_id: docker:IMAGE containers itself (host network and IPC, the home "
    "bind-mounted; more options in config.docker.run_options); private registries need docker login "
    "(or podman login) on the node"
)
_INTERNAL = "is internal to SkyPilot (it writes it itself); leave it out"
NO_TPU_NODES = (
    "TPU nodes (a TPU beside a separate host VM) are deprecated by Google; skyhop launches TPU VMs: "
    "drop tpu_vm or set it to true"
)
NO_QUEUED_RESOURCES = (
    "queued resources are not supported; skyhop creates the TPU VM directly and fails over to the "
    "next zone when one has no capacity"
)
_NO_RESOURCE_VOLUMES = (
    "disks attached through resources are not supported; use resources.disk_size for a bigger disk, "
    "or a Kubernetes volume: volumes: {PATH: NAME} (skyhop volumes apply)"
)

TASK_REFUSED: dict[str, str] = {
    "event_callback": (
        "not supported; skyhop records every status change (skyhop jobs queue --json, the Temporal Web UI)"
    ),
    "file_mounts_mapping": _INTERNAL,
    "packed": "is written by skyhop when it uploads the workdir and file mounts; leave it out",
    "volume_mounts": f"{_INTERNAL}: mount volumes with volumes: {{PATH: NAME}}",
    "managed_secrets": (
        "managed secret stores are not supported; give values in secrets: {NAME: value} "
        "or --secret NAME=VALUE"
    ),
    "api_server_access": (
        "skyhop has no API server; a job that drives skyhop needs a Temporal client and the key"
    ),
}
"""Task fields refused whatever their value (``api_server_access: false`` is accepted: it asks nothing)."""

RESOURCES_REFUSED: dict[str, str] = {
    "volumes": _NO_RESOURCE_VOLUMES,
    "local_disk": "not selectable; pick an instance_type that has local disks",
    "priority": "skyhop runs a cluster's jobs first in, first out; submit them in the order they should run",
    "_docker_login_config": f"{_INTERNAL} ({_NO_CONTAINERS})",
    "_is_image_managed": _INTERNAL,
    "_requires_fuse": _INTERNAL,
    "_cluster_config_overrides": _INTERNAL,
}

CONFIG_REFUSED: dict[str, str] = {
    "nvidia_gpus": "skyhop leaves the GPU driver's settings as the image has them",
    "ssh": "SSH node pools are set up in their pools file (skyhop ssh up)",
    "azure": "skyhop's Azure provider makes its own network per cluster and uses its own identity",
    "active_workspace": "skyhop has no workspaces: one Temporal namespace is one workspace",
    "hooks": "lifecycle hooks are not supported; end 'run' with what should happen",
}
"""SkyPilot's task ``config:`` keys (its overridable settings) that would change a launch skyhop makes:
refused, naming the key."""

CONFIG_ACTED_ON: dict[str, tuple[str, ...]] = {
    "docker": ("run_options",),
    "kubernetes": (
        "pod_config",
        "custom_metadata",
        "provision_timeout",
        "enable_docker",
        "image_builder",
        "container_tools",
    ),
    "gcp": ("enable_gvnic",),
}
"""``config:`` sections whose keys skyhop acts on (``spec.task_config.TaskConfig``)."""

CONFIG_KEYS_REFUSED: dict[str, str] = {
    "gcp.managed_instance_group": (
        "DWS managed instance groups are not supported: skyhop creates each instance itself and "
        "fails over to the next zone when one has no capacity (use -r to keep trying)"
    ),
    "gcp.placement_policy": (
        "compact placement is not supported yet: skyhop's instances take GCP's default placement"
    ),
    "gcp.enable_gpu_direct": (
        "GPUDirect-TCPX networks are not set up by skyhop; network_tier: best gives the instances gVNIC"
    ),
    "kubernetes.dws": "GKE's Dynamic Workload Scheduler is not supported: skyhop creates plain pods",
    "kubernetes.kueue": "Kueue queues are not supported: skyhop creates plain pods and queues jobs itself",
}
"""Keys of the acted-on sections that SkyPilot lets a task override but skyhop cannot act on."""

CONFIG_INERT = ("vast", "slurm")
"""``config:`` keys for infrastructure skyhop has no provider for. SkyPilot applies them only when the
task lands there, which under skyhop it never does, so they are accepted and change nothing: the
same launch SkyPilot makes anywhere else."""

SKYPILOT_CLOUDS = (
    "aws", "azure", "gcp", "ibm", "lambda", "scp", "oci", "kubernetes", "runpod", "vast", "vsphere", "cudo",
    "fluidstack", "paperspace", "primeintellect", "do", "nebius", "ssh", "slurm", "hyperbolic", "seeweb",
    "shadeform", "yotta", "mithril", "verda", "k8s",
)  # fmt: skip
"""The clouds SkyPilot's schema names (``constants.ALL_CLOUDS``, and ``k8s``)."""


class MissingCloudError(SpecError):
    """The task can only run on clouds skyhop has no provider for."""


def _refuse(table: Mapping[str, str], data: Mapping[str, Any], prefix: str) -> None:
    for key in data:
        if key in table:
            raise SpecError(f"{prefix}{key}", table[key])


def check_refused(task: Mapping[str, Any]) -> None:
    """Raise ``SpecError`` for the first field of ``task`` skyhop refuses, naming it and why."""
    _refuse({k: v for k, v in TASK_REFUSED.items() if k != "api_server_access"}, task, "")
    if task.get("api_server_access"):
        raise SpecError("api_server_access", TASK_REFUSED["api_server_access"])
    config = task.get("config")
    if config is not None:
        if not isinstance(config, Mapping):
            raise SpecError("config", "must be a mapping of SkyPilot settings")
        for key, section in config.items():
            if key in CONFIG_ACTED_ON:
                _check_config_section(str(key), section)
            elif key not in CONFIG_INERT:
                raise SpecError(f"config.{key}", CONFIG_REFUSED.get(str(key), "not a setting skyhop has"))
    resources = task.get("resources")
    if isinstance(resources, Mapping):
        _refuse(RESOURCES_REFUSED, resources, "resources.")
        for choices in ("any_of", "ordered"):
            for index, item in enumerate(resources.get(choices) or []):
                if isinstance(item, Mapping):
                    _refuse(RESOURCES_REFUSED, item, f"resources.{choices}.{index}.")


def _check_config_section(name: str, section: object) -> None:
    """Refuse a key of ``config.NAME`` that skyhop does not act on, by its full name."""
    if not isinstance(section, Mapping):
        raise SpecError(f"config.{name}", "must be a mapping of settings")
    allowed = CONFIG_ACTED_ON[name]
    for key in section:
        if key not in allowed:
            reason = CONFIG_KEYS_REFUSED.get(
                f"{name}.{key}",
                "not a setting a task may override (SkyPilot reads it only from its config file)",
            )
            raise SpecError(f"config.{name}.{key}", f"{reason}; acted on: {', '.join(allowed)}")


def _missing_cloud(item: Mapping[str, Any]) -> str | None:
    """The SkyPilot cloud ``item`` pins that skyhop has no provider for, or None."""
    raw = item.get("infra") or item.get("cloud")
    if not isinstance(raw, str):
        return None
    cloud = canonical_name(raw.strip().split("/")[0])
    known = cloud in all_provider_names() or cloud == "*"
    return None if known or cloud not in SKYPILOT_CLOUDS else cloud


def _no_provider(clouds: list[str]) -> str:
    available = ", ".join(all_provider_names())
    names = ", ".join(dict.fromkeys(clouds))
    return f"skyhop has no provider for {names}; available: {available}"


_CLOUD_OF_SCHEME = {"nebius": "nebius", "oci": "oci", "cos": "ibm"}
"""Bucket URL schemes of SkyPilot's stores on clouds skyhop has no provider for."""


def check_store_clouds(file_mounts: object) -> None:
    """Raise ``MissingCloudError`` for a storage entry whose bucket is on a cloud skyhop has no
    provider for (``store: nebius``, ``source: nebius://b``): only SkyPilot on that cloud can run
    such a task."""
    if not isinstance(file_mounts, Mapping):
        return
    for target, entry in file_mounts.items():
        store = entry.get("store") if isinstance(entry, Mapping) else None
        source = entry.get("source") if isinstance(entry, Mapping) else entry
        scheme = source.partition("://")[0].lower() if isinstance(source, str) and "://" in source else ""
        for field, name in (("store", store), ("source", _CLOUD_OF_SCHEME.get(scheme))):
            cloud = _missing_cloud({"cloud": name}) if isinstance(name, str) else None
            if cloud is not None:
                where = f"file_mounts.{target}" + (f".{field}" if isinstance(entry, Mapping) else "")
                raise MissingCloudError(where, f"the bucket is on {cloud}: " + _no_provider([cloud]))


def drop_missing_clouds(resources: Mapping[str, Any]) -> dict[str, Any]:
    """``resources`` without the ``any_of``/``ordered`` items pinned to clouds skyhop lacks.

    Raises ``MissingCloudError`` when the resources themselves, or every item, pin such a cloud.
    """
    data = dict(resources)
    for choices in ("any_of", "ordered"):
        items = data.get(choices)
        if not isinstance(items, list) or not items:
            continue
        missing = [_missing_cloud(item) if isinstance(item, Mapping) else None for item in items]
        kept = [item for item, cloud in zip(items, missing, strict=True) if cloud is None]
        if not kept:
            raise MissingCloudError(f"resources.{choices}", "every alternative: " + _no_provider(missing))  # type: ignore[arg-type]
        pins_location = all(isinstance(i, Mapping) and ({"infra", "cloud"} & i.keys()) for i in kept)
        data[choices] = kept
        if pins_location:
            return data  # each item says where; the outer location does not apply
    outer = _missing_cloud(data)
    if outer is not None:
        field = "resources.infra" if "infra" in data else "resources.cloud"
        raise MissingCloudError(field, _no_provider([outer]))
    return data
