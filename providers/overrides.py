"""A task's provider settings (SkyPilot's task-level ``config:``), as a provision attempt carries them.

SkyPilot lets a task override a few settings of its config file for its own launches
(``constants.OVERRIDEABLE_CONFIG_KEYS_IN_TASK``). skyhop acts on the provider ones it can: each
provider reads its own section from the ``ProvisionRequest`` and ignores the others, as SkyPilot
applies ``kubernetes.*`` only where the task lands on Kubernetes.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["DockerInPod", "DockerMode", "GcpOverrides", "KubernetesOverrides", "ProviderOverrides"]


class DockerMode(StrEnum):
    """What a pod's container-runtime sidecar can do (``kubernetes/docker_sidecar.py`` builds it)."""

    ALL = "all"
    """A privileged Docker daemon: ``docker build``, ``push`` and ``run``."""
    BUILD = "build"
    """A rootless BuildKit daemon: image builds and pushes only, no privileges asked for."""


_DOCKER_VALUES = "true, false, all, build or {mode: all|build, cache_volume: VOLUME}"
_DOCKER_ALIASES = ("image_builder", "container_tools")
"""Earlier names of ``enable_docker`` in SkyPilot's examples; the same setting."""
_EARLIER_TYPES = {"dind": "all", "buildkit": "build"}
"""The earlier names' ``type``: which ``enable_docker`` mode each is."""


class DockerInPod(BaseModel):
    """``config.kubernetes.enable_docker``: a container runtime beside each pod's node container."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: DockerMode
    cache_volume: str | None = None
    """The volume (``skyhop volumes apply``: a PVC) kept as the daemon's data, each pod in its own
    folder of it, so images and build cache outlive the cluster; None: an emptyDir, gone with the pod."""

    @classmethod
    def read(cls, value: object) -> DockerInPod | None:
        """SkyPilot's spellings: ``true``/``all``, ``build`` (any case), ``false``, or a mapping whose
        ``mode`` (or ``enabled``) is one of those, with an optional ``cache_volume``; and its earlier
        examples' ``{type: dind|buildkit, volume: NAME}`` (under ``image_builder``/``container_tools``)."""
        if isinstance(value, dict) and "type" in value:
            kind = value["type"].lower() if isinstance(value["type"], str) else None
            if set(value) - {"type", "volume"} or kind not in _EARLIER_TYPES:
                raise ValueError(
                    f"must be one of {_DOCKER_VALUES}, or {{type: dind|buildkit}}, got {value!r}"
                )
            return cls.read({"mode": _EARLIER_TYPES[kind], "cache_volume": value.get("volume")})
        if isinstance(value, dict):
            extra = set(value) - {"mode", "enabled", "cache_volume"}
            cache = value.get("cache_volume")
            if extra or ("mode" in value) == ("enabled" in value) or not isinstance(cache, str | None):
                raise ValueError(f"must be one of {_DOCKER_VALUES}, got {value!r}")
            mode = cls.read(value.get("mode", value.get("enabled")))
            if mode is None or not cache:
                return mode
            # Here, not at the top: skyhop.spec imports this module while it initialises.
            from skyhop.spec.volume import check_volume_name

            return cls(mode=mode.mode, cache_volume=check_volume_name(cache))
        if value is False:
            return None
        word = "all" if value is True else value.lower() if isinstance(value, str) else None
        if word not in tuple(DockerMode):
            raise ValueError(f"must be one of {_DOCKER_VALUES}, got {value!r}")
        return cls(mode=DockerMode(word))


class KubernetesOverrides(BaseModel):
    """``config.kubernetes``: what every pod of the task gets beside skyhop's own manifest."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pod_config: dict[str, Any] = {}
    """A partial Pod merged into each pod (``pods.merge_pod_config``): skyhop's own values win."""
    custom_metadata: dict[str, dict[str, str]] = {}
    """``{labels: {...}, annotations: {...}}`` put on each pod."""
    provision_timeout: float | None = Field(default=None, ge=0)
    """Seconds an unschedulable pod may wait for a cluster autoscaler; None: the config file's."""
    enable_docker: DockerInPod | None = None
    """A Docker-in-Docker or BuildKit sidecar in each pod (``kubernetes/docker_sidecar.py``); None: none."""

    @model_validator(mode="before")
    @classmethod
    def _aliases_are_enable_docker(cls, data: object) -> object:
        if not isinstance(data, dict):
            return data
        given = [key for key in ("enable_docker", *_DOCKER_ALIASES) if key in data]
        if len(given) > 1:
            raise ValueError(f"{' and '.join(given)} are one setting (enable_docker): give one")
        if given:
            value = data[given[0]]
            data = {k: v for k, v in data.items() if k not in _DOCKER_ALIASES} | {"enable_docker": value}
        return data

    @field_validator("enable_docker", mode="before")
    @classmethod
    def _read_enable_docker(cls, value: object) -> object:
        # None is how "no sidecar" comes back from JSON (a workflow's payload): read as it is, or no
        # activity could decode its request (a dumped setting, ``{mode, cache_volume}``, reads back).
        if value is None or isinstance(value, DockerInPod):
            return value
        return DockerInPod.read(value)


class GcpOverrides(BaseModel):
    """``config.gcp``: how the task's Compute Engine instances are made."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enable_gvnic: bool | None = Field(default=None, strict=True)
    """Give each instance a gVNIC network interface (as ``network_tier: best`` does)."""


class ProviderOverrides(BaseModel):
    """Every provider's section; a provider reads only its own."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kubernetes: KubernetesOverrides = KubernetesOverrides()
    gcp: GcpOverrides = GcpOverrides()
    docker_arguments: list[str] = []
    """``config.docker.run_options``, split: where a node is a pod, the parts of the pod they amount
    to (``providers.pod_run_options``); elsewhere the node runner's ``docker run`` takes them."""
