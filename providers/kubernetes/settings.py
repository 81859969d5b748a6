"""The ``kubernetes`` section of ``~/.skyhop/config.yaml``: which kubeconfig and contexts, and how long
to wait for a cluster autoscaler. Read on every use, so a worker follows edits without a restart.

    kubernetes:
      kubeconfig: ~/.kube/config    # default: $KUBECONFIG (its first file), else ~/.kube/config
      allowed_contexts: [a, b]      # failover candidates, in order; default: the current context
      namespace: ml                 # default: each context's own namespace, else "default"
      image: python:3.11-slim       # the pods' image (it needs sh, tar and python3)
      autoscaler: generic           # a cluster autoscaler adds nodes: wait for it (SkyPilot's field)
      provision_timeout: 600        # seconds to wait for it before failing over

Without an autoscaler a pod the scheduler reports unschedulable (FailedScheduling) fails the attempt
at once, so failover moves to the next context instead of waiting on capacity that will not come.
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from skyhop.providers.home import skyhop_home

__all__ = ["DEFAULT_IMAGE", "KubernetesSettings", "SettingsError", "load_settings"]

DEFAULT_IMAGE = "python:3.11-slim"
"""A small image with what the node runner needs: ``sh``, ``tar`` and ``python3``."""


class SettingsError(ValueError):
    """The ``kubernetes`` section of the config file is invalid; the message names the field."""


class KubernetesSettings(BaseModel):
    """The ``kubernetes`` section, validated."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kubeconfig: str | None = None
    allowed_contexts: list[str] | None = Field(default=None, min_length=1)
    namespace: str | None = None
    image: str = DEFAULT_IMAGE
    autoscaler: str | None = None
    provision_timeout: float = Field(default=600.0, ge=0)

    def kubeconfig_path(self) -> Path:
        """The kubeconfig file: configured, else ``$KUBECONFIG``'s first file, else ``~/.kube/config``."""
        if self.kubeconfig:
            return Path(self.kubeconfig).expanduser()
        env = os.environ.get("KUBECONFIG", "").split(os.pathsep)[0]
        return Path(env).expanduser() if env else Path.home() / ".kube" / "config"

    @property
    def unschedulable_wait_s(self) -> float:
        """How long a pod may stay unschedulable before the attempt fails: only an autoscaler can help."""
        return self.provision_timeout if self.autoscaler else 0.0


def load_settings() -> KubernetesSettings:
    """The section as the config file holds it now (defaults where it is absent)."""
    path = skyhop_home() / "config.yaml"
    try:
        data = yaml.safe_load(path.read_text()) if path.exists() else None
    except (OSError, yaml.YAMLError) as exc:
        raise SettingsError(f"{path}: {exc}") from None
    section = (data or {}).get("kubernetes") if isinstance(data, dict) else None
    try:
        return KubernetesSettings.model_validate(section or {})
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(p) for p in error["loc"])
        raise SettingsError(f"{path}: kubernetes.{where}: {error['msg']}") from None
