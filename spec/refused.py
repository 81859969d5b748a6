"""SkyPilot task fields skyhop refuses, each with what skyhop does instead, and clouds it lacks.

A field skyhop cannot act on is refused by name before anything starts, never ignored: a task
that asks for a priority, a volume or a container must not run as if it had not. Alternatives
(``any_of``/``ordered`` items) naming a cloud of SkyPilot's that skyhop has no provider for are
skipped, as a disabled cloud is; only when none is left is the task refused (``MissingCloudError``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from skyhop.providers.registry import all_provider_names, canonical_name
from skyhop.spec.errors import SpecError

__all__ = [
    "CONFIG_INERT",
    "NO_TPUS",
    "CONFIG_REFUSED",
    "RESOURCES_REFUSED",
    "SKYPILOT_CLOUDS",
    "TASK_REFUSED",
    "MissingCloudError",
    "check_refused",
    "drop_missing_clouds",
]

_NO_CONTAINERS = (
    "skyhop runs image_id: docker:IMAGE containers with its own options (host network and IPC, the "
    "home bind-mounted); private registries need docker login (or podman login) on the node"
)
_INTERNAL = "is internal to SkyPilot (it writes it itself); leave it out"
NO_TPUS = (
    "TPUs are not supported yet (skyhop's GCP provider launches VMs with GPUs); "
    "ask for GPUs such as A100:8 or H100:8"
)
_NO_VOLUMES = "volumes are not supported; use resources.disk_size for a bigger disk, or file_mounts"

TASK_REFUSED: dict[str, str] = {
    "event_callback": (
        "not supported; skyhop records every status change (skyhop jobs queue --json, the Temporal Web UI)"
    ),
    "file_mounts_mapping": _INTERNAL,
    "packed": "is written by skyhop when it uploads the workdir and file mounts; leave it out",
    "volumes": _NO_VOLUMES,
    "volume_mounts": _NO_VOLUMES,
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
    "accelerator_args": f"TPU options; {NO_TPUS}",
    "volumes": _NO_VOLUMES,
    "local_disk": "not selectable; pick an instance_type that has local disks",
    "priority": "skyhop runs a cluster's jobs first in, first out; submit them in the order they should run",
    "priority_class": (
        "a Kubernetes PriorityClass for the pods; not supported yet: skyhop's pods take the "
        "cluster's default priority"
    ),
    "_docker_login_config": f"{_INTERNAL} ({_NO_CONTAINERS})",
    "_is_image_managed": _INTERNAL,
    "_requires_fuse": _INTERNAL,
    "_cluster_config_overrides": _INTERNAL,
}

CONFIG_REFUSED: dict[str, str] = {
    "docker": _NO_CONTAINERS,
    "nvidia_gpus": "skyhop leaves the GPU driver's settings as the image has them",
    "ssh": "SSH node pools are set up in their pools file (skyhop ssh up)",
    "gcp": "skyhop's GCP provider uses the project's default network and no placement policies",
    "azure": "skyhop's Azure provider makes its own network per cluster and uses its own identity",
    "active_workspace": "skyhop has no workspaces: one Temporal namespace is one workspace",
    "hooks": "lifecycle hooks are not supported; end 'run' with what should happen",
}
"""SkyPilot's task ``config:`` keys (its overridable settings) that would change a launch skyhop makes:
refused, naming the key."""

CONFIG_INERT = ("kubernetes", "vast", "slurm")
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
        for key in config:
            if key not in CONFIG_INERT:
                raise SpecError(f"config.{key}", CONFIG_REFUSED.get(str(key), "not a setting skyhop has"))
    resources = task.get("resources")
    if isinstance(resources, Mapping):
        _refuse(RESOURCES_REFUSED, resources, "resources.")
        for choices in ("any_of", "ordered"):
            for index, item in enumerate(resources.get(choices) or []):
                if isinstance(item, Mapping):
                    _refuse(RESOURCES_REFUSED, item, f"resources.{choices}.{index}.")


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
