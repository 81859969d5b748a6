"""A task's ``config:`` section: the SkyPilot settings a task may override for its own launches.

SkyPilot allows a task to override only some keys of its config file
(``constants.OVERRIDEABLE_CONFIG_KEYS_IN_TASK``); skyhop acts on those it can (``docker.run_options``,
``kubernetes.pod_config``/``custom_metadata``/``provision_timeout``/``enable_docker`` (and its
older names ``image_builder``, ``container_tools``), ``gcp.enable_gvnic``) and
``spec.refused`` refuses every other key by its full name before this model sees it.
"""

from __future__ import annotations

import shlex

from pydantic import BaseModel, ConfigDict, field_validator

from skyhop.providers.overrides import GcpOverrides, KubernetesOverrides, ProviderOverrides

__all__ = ["DockerConfig", "TaskConfig"]


class DockerConfig(BaseModel):
    """``config.docker``: how the task's container (``image_id: docker:IMAGE``) is started."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    run_options: list[str] = []
    """Options added to ``docker run``/``podman run`` after skyhop's own, each entry split as a shell
    would split it (``-v /a:/b`` is two arguments), as SkyPilot passes them to its ``docker run``."""

    @field_validator("run_options", mode="before")
    @classmethod
    def _one_or_many(cls, value: object) -> object:
        items = [value] if isinstance(value, str) else value
        if isinstance(items, list):
            for item in items:
                if not isinstance(item, str) or not shlex.split(item):
                    raise ValueError(f"each run option must be a non-empty string, got {item!r}")
        return items

    @property
    def arguments(self) -> list[str]:
        """The options as ``docker run`` arguments."""
        return [part for option in self.run_options for part in shlex.split(option)]


class TaskConfig(BaseModel):
    """The ``config:`` keys skyhop acts on."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    docker: DockerConfig = DockerConfig()
    kubernetes: KubernetesOverrides = KubernetesOverrides()
    gcp: GcpOverrides = GcpOverrides()

    @property
    def provider_overrides(self) -> ProviderOverrides:
        """What the task's provision attempts carry to their provider."""
        return ProviderOverrides(
            kubernetes=self.kubernetes, gcp=self.gcp, docker_arguments=self.docker.arguments
        )
