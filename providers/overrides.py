"""A task's provider settings (SkyPilot's task-level ``config:``), as a provision attempt carries them.

SkyPilot lets a task override a few settings of its config file for its own launches
(``constants.OVERRIDEABLE_CONFIG_KEYS_IN_TASK``). skyhop acts on the provider ones it can: each
provider reads its own section from the ``ProvisionRequest`` and ignores the others, as SkyPilot
applies ``kubernetes.*`` only where the task lands on Kubernetes.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["GcpOverrides", "KubernetesOverrides", "ProviderOverrides"]


class KubernetesOverrides(BaseModel):
    """``config.kubernetes``: what every pod of the task gets beside skyhop's own manifest."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pod_config: dict[str, Any] = {}
    """A partial Pod merged into each pod (``pods.merge_pod_config``): skyhop's own values win."""
    custom_metadata: dict[str, dict[str, str]] = {}
    """``{labels: {...}, annotations: {...}}`` put on each pod."""
    provision_timeout: float | None = Field(default=None, ge=0)
    """Seconds an unschedulable pod may wait for a cluster autoscaler; None: the config file's."""


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
