"""``Task``: one unit of work (setup + run on ``num_nodes`` nodes), in SkyPilot's YAML field names."""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from skyhop.spec.limits import (
    MAX_ENVS,
    MAX_ENVS_BYTES,
    MAX_FILE_MOUNTS,
    MAX_NAME_CHARS,
    MAX_NUM_NODES,
    MAX_PATH_CHARS,
    MAX_SCRIPT_BYTES,
)
from skyhop.spec.packed import PackedFiles
from skyhop.spec.pool import Pool
from skyhop.spec.resources import Resources
from skyhop.spec.service import Service
from skyhop.spec.storage import Storage, StorageMode
from skyhop.spec.task_config import TaskConfig
from skyhop.spec.volume import task_volumes

__all__ = ["GitWorkdir", "Task", "env_mapping"]

_ENV_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class GitWorkdir(BaseModel):
    """SkyPilot's ``workdir: {url, ref}``: a git repository, checked out at ``ref`` as the workdir."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str = Field(min_length=1, max_length=MAX_PATH_CHARS)
    """Anything ``git clone`` takes: ``https://``, ``git@host:repo``, ``file://``."""
    ref: str | None = Field(default=None, min_length=1, max_length=MAX_NAME_CHARS)
    """A branch, tag or commit; None: the repository's default branch."""


def env_mapping(value: object, what: str, *, show_values: bool = True) -> object:
    """``envs``/``secrets`` as ``{NAME: str | None}``, bounded; a secret's value never enters an error."""
    if not isinstance(value, dict):
        return value
    if len(value) > MAX_ENVS:
        raise ValueError(f"{len(value)} variables; at most {MAX_ENVS} are allowed")
    for key, item in value.items():
        if not isinstance(key, str) or not _ENV_KEY.fullmatch(key):
            shown = repr(key) if show_values or not isinstance(key, str) else f"{key[:40]!r}"
            raise ValueError(f"{what} name {shown} must match [A-Za-z_][A-Za-z0-9_]*")
        if isinstance(item, dict | list):
            raise ValueError(f"{what} {key} must be a string, number or null")
    envs = {k: None if v is None else str(v) for k, v in value.items()}
    size = sum(len(k.encode()) + len((v or "").encode()) + 2 for k, v in envs.items())
    if size > MAX_ENVS_BYTES:
        raise ValueError(
            f"{size // 1024} KiB of names and values; at most {MAX_ENVS_BYTES // 1024} KiB "
            "(put large values in a file and mount it)"
        )
    return envs


class Task(BaseModel):
    """A task as the workflows receive it: paths are absolute, envs are filled in."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str | None = Field(default=None, max_length=MAX_NAME_CHARS)
    workdir: str | None = Field(default=None, max_length=MAX_PATH_CHARS)
    """Local folder synced to every node before setup; setup and run start in it."""
    workdir_git: GitWorkdir | None = None
    """The workdir as a git repository instead (YAML: ``workdir: {url, ref}``)."""
    num_nodes: int = Field(default=1, ge=1, le=MAX_NUM_NODES, strict=True)
    resources: Resources = Resources()
    envs: dict[str, str | None] = {}
    """Environment of setup and run. A null value must be supplied with ``--env``."""
    secrets: dict[str, str | None] = Field(default={}, repr=False)
    """Like ``envs`` (a secret wins over an env of the same name), overridden by ``--secret``, and
    never displayed: plans, JSON and errors show names only."""
    file_mounts: dict[str, str | Storage] = {}
    """Remote path on each node -> a local path on this machine, a bucket URL (``s3://b/p``,
    ``gs://``, ``az://``, ``r2://``), an ``https://`` file, or a storage dict (``spec.storage``).
    A remote path is under the node's home (``~/data``, or relative) or absolute, and never
    contains ``..``."""
    volumes: dict[str, str] = {}
    """Mount path on each node -> the name of a volume (``skyhop volumes apply``), SkyPilot's
    ``{path: name}`` or ``{path: {name: name}}``: the task runs in the volume's Kubernetes context."""
    setup: str | None = None
    run: str | None = None
    config: TaskConfig = TaskConfig()
    """The SkyPilot settings the task overrides for its own launches (``config:``; others refused)."""
    service: Service | None = None
    """What ``skyhop serve up`` (not built yet) serves; ``launch`` runs the task without it."""
    pool: Pool | None = None
    """A pool of workers (``skyhop jobs pool apply``): the task is the workers' resources and setup."""
    packed: PackedFiles | None = None
    """Set by the client that uploaded the workdir and local file mounts into the content store:
    workers fetch those instead of reading the paths above, which are on the client's machine."""

    @model_validator(mode="before")
    @classmethod
    def _git_workdir(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("workdir"), dict):
            if data.get("workdir_git") is not None:
                raise ValueError("give the git workdir once, as workdir: {url, ref}")
            data = {**data, "workdir_git": data["workdir"], "workdir": None}
        return data

    @model_validator(mode="after")
    def _one_workdir(self) -> Task:
        if self.workdir is not None and self.workdir_git is not None:
            raise ValueError("a workdir is either a local folder or a git repository, not both")
        return self

    @model_validator(mode="after")
    def _pool_is_no_service(self) -> Task:
        # A pool file's ``run`` (SkyPilot's examples end setup with ``run: echo "setup done"``) is
        # each worker's first job, once, as a launch's run is; the pool's jobs queue behind it.
        if self.pool is None:
            return self
        if self.service is not None:
            raise ValueError("service: a task is a pool or a service, not both")
        return self

    @model_validator(mode="after")
    def _cached_mounts_on_the_node(self) -> Task:
        cached = [
            target
            for target, entry in self.file_mounts.items()
            if isinstance(entry, Storage) and entry.mode is StorageMode.MOUNT_CACHED
        ]
        if cached and self.resources.docker_image is not None:
            raise ValueError(
                f"file_mounts: {cached[0]}: MOUNT_CACHED is flushed by the node, outside the task's "
                "container (image_id: docker:...); use mode: MOUNT there"
            )
        return self

    @property
    def needs_setup(self) -> bool:
        """Whether nodes run a setup stage: the task's setup, or its container's (the image is pulled
        and the set-up container kept there, so a node without docker or podman fails at setup)."""
        return bool(self.setup) or self.resources.docker_image is not None

    @property
    def has_workdir(self) -> bool:
        """Whether nodes get a workdir: a local folder or a git repository."""
        return bool(self.workdir or self.workdir_git)

    @property
    def job_envs(self) -> dict[str, str]:
        """What setup and run see: envs, then secrets over them (SkyPilot's order)."""
        merged = {**self.envs, **self.secrets}
        return {key: value for key, value in merged.items() if value is not None}

    @field_validator("envs", mode="before")
    @classmethod
    def _check_envs(cls, value: object) -> object:
        return env_mapping(value, "env")

    @field_validator("secrets", mode="before")
    @classmethod
    def _check_secrets(cls, value: object) -> object:
        if isinstance(value, list):
            raise ValueError(
                "managed secret references are not supported; give each value: secrets: {NAME: value} "
                "or --secret NAME=VALUE"
            )
        return env_mapping(value, "secret", show_values=False)

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

    @field_validator("volumes", mode="before")
    @classmethod
    def _check_volumes(cls, value: object) -> object:
        return task_volumes(value)

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
            if field in ("type", "config"):
                raise ValueError(
                    f"{target}.{field}: a storage entry is a bucket (name, source, store, persistent, "
                    "mode); mount a volume with volumes: {PATH: NAME}"
                ) from None
            allowed = ", ".join(Storage.model_fields)
            raise ValueError(f"{target}: unknown storage field {field!r}; allowed: {allowed}") from None
        message = error["msg"].removeprefix("Value error, ")
        where = f"{target}.{field}" if field else target
        raise ValueError(f"{where}: {message}") from None
