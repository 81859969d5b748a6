"""``Task``: one unit of work (setup + run on ``num_nodes`` nodes), in SkyPilot's YAML field names."""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from skyhop.spec.limits import (
    MAX_ENVS,
    MAX_ENVS_BYTES,
    MAX_FILE_MOUNTS,
    MAX_NAME_CHARS,
    MAX_NUM_NODES,
    MAX_PATH_CHARS,
    MAX_SCRIPT_BYTES,
)
from skyhop.spec.resources import Resources
from skyhop.spec.storage import Storage

__all__ = ["Task"]

_ENV_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class Task(BaseModel):
    """A task as the workflows receive it: paths are absolute, envs are filled in."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str | None = Field(default=None, max_length=MAX_NAME_CHARS)
    workdir: str | None = Field(default=None, max_length=MAX_PATH_CHARS)
    """Local folder synced to every node before setup; setup and run start in it."""
    num_nodes: int = Field(default=1, ge=1, le=MAX_NUM_NODES, strict=True)
    resources: Resources = Resources()
    envs: dict[str, str | None] = {}
    """Environment of setup and run. A null value must be supplied with ``--env``."""
    file_mounts: dict[str, str | Storage] = {}
    """Remote path on each node -> a local path on this machine, a bucket URL (``s3://b/p``,
    ``gs://``, ``az://``, ``r2://``), an ``https://`` file, or a storage dict (``spec.storage``).
    A remote path is under the node's home (``~/data``, or relative) or absolute, and never
    contains ``..``."""
    setup: str | None = None
    run: str | None = None

    @field_validator("envs", mode="before")
    @classmethod
    def _check_envs(cls, value: object) -> object:
        if not isinstance(value, dict):
            return value
        if len(value) > MAX_ENVS:
            raise ValueError(f"{len(value)} variables; at most {MAX_ENVS} are allowed")
        for key, item in value.items():
            if not isinstance(key, str) or not _ENV_KEY.fullmatch(key):
                raise ValueError(f"env name {key!r} must match [A-Za-z_][A-Za-z0-9_]*")
            if isinstance(item, dict | list):
                raise ValueError(f"env {key} must be a string, number or null")
        envs = {k: None if v is None else str(v) for k, v in value.items()}
        size = sum(len(k.encode()) + len((v or "").encode()) + 2 for k, v in envs.items())
        if size > MAX_ENVS_BYTES:
            raise ValueError(
                f"{size // 1024} KiB of names and values; at most {MAX_ENVS_BYTES // 1024} KiB "
                "(put large values in a file and mount it)"
            )
        return envs

    @field_validator("file_mounts", mode="before")
    @classmethod
    def _check_file_mounts(cls, value: object) -> object:
        if not isinstance(value, dict):
            return value
        if len(value) > MAX_FILE_MOUNTS:
            raise ValueError(f"{len(value)} entries; at most {MAX_FILE_MOUNTS} are allowed")
        for target, source in value.items():
            if not isinstance(target, str) or not target or "\0" in target or len(target) > MAX_PATH_CHARS:
                raise ValueError(
                    f"target {str(target)[:80]!r} must be a path of 1-{MAX_PATH_CHARS} characters"
                )
            if ".." in PurePosixPath(target).parts:
                raise ValueError(
                    f"target {target!r} must not contain '..'; name a path under ~ (or an absolute path)"
                )
            if isinstance(source, str) and len(source) > MAX_PATH_CHARS:
                raise ValueError(f"source of {target!r} is longer than {MAX_PATH_CHARS} characters")
        return {
            target: _storage(target, source) if isinstance(source, dict) else source
            for target, source in value.items()
        }

    @field_validator("setup", "run", mode="before")
    @classmethod
    def _check_script(cls, value: object) -> object:
        if isinstance(value, list):
            raise ValueError("must be a shell script string (use '|' for several lines)")
        if isinstance(value, str) and len(value.encode()) > MAX_SCRIPT_BYTES:
            raise ValueError(
                f"script is {len(value.encode()) // 1024} KiB; at most {MAX_SCRIPT_BYTES // 1024} KiB "
                "(put a longer one in a file in the workdir and run that)"
            )
        return value


def _storage(target: str, entry: dict[object, object]) -> Storage:
    """A storage dict as one line naming the entry and its field, in SkyPilot's words where it has them."""
    try:
        return Storage.model_validate(entry)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(part) for part in error["loc"])
        if error["type"] == "extra_forbidden":
            allowed = ", ".join(Storage.model_fields)
            raise ValueError(f"{target}: unknown storage field {field!r}; allowed: {allowed}") from None
        message = error["msg"].removeprefix("Value error, ")
        where = f"{target}.{field}" if field else target
        raise ValueError(f"{where}: {message}") from None
