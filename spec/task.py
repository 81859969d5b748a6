"""``Task``: one unit of work (setup + run on ``num_nodes`` nodes), in SkyPilot's YAML field names."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

from spec.resources import Resources

__all__ = ["Task"]

_ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class Task(BaseModel):
    """A task as the workflows receive it: paths are absolute, envs are filled in."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str | None = None
    workdir: str | None = None
    """Local folder synced to every node before setup; setup and run start in it."""
    num_nodes: int = Field(default=1, ge=1)
    resources: Resources = Resources()
    envs: dict[str, str | None] = {}
    """Environment of setup and run. A null value must be supplied with ``--env``."""
    file_mounts: dict[str, str] = {}
    """Remote path on each node -> local path on this machine."""
    setup: str | None = None
    run: str | None = None

    @field_validator("envs", mode="before")
    @classmethod
    def _check_envs(cls, value: object) -> object:
        if not isinstance(value, dict):
            return value
        for key, item in value.items():
            if not isinstance(key, str) or not _ENV_KEY.match(key):
                raise ValueError(f"env name {key!r} must match [A-Za-z_][A-Za-z0-9_]*")
            if isinstance(item, dict | list):
                raise ValueError(f"env {key} must be a string, number or null")
        return {k: None if v is None else str(v) for k, v in value.items()}

    @field_validator("setup", "run", mode="before")
    @classmethod
    def _check_script(cls, value: object) -> object:
        if isinstance(value, list):
            raise ValueError("must be a shell script string (use '|' for several lines)")
        return value
