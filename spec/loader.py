"""Reading a task from YAML or a shell command, and applying CLI overrides.

Everything a user can get wrong is checked here, before any workflow starts: a workflow given
bad input would retry its first task forever, so bad input must never reach one.
"""

from __future__ import annotations

import os
import reprlib
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from skyhop.spec.dag import Dag, dag_from_documents
from skyhop.spec.errors import SpecError, did_you_mean
from skyhop.spec.resources import Resources
from skyhop.spec.storage import URL_SCHEMES, Storage
from skyhop.spec.task import Task
from skyhop.spec.yaml_reader import read_yaml_documents

__all__ = ["TaskOverrides", "load_dag", "load_task", "looks_like_yaml_path", "task_from_dict"]


def looks_like_yaml_path(entrypoint: str) -> bool:
    """Whether the CLI entrypoint names a YAML file (otherwise it is a shell command)."""
    return entrypoint.endswith((".yaml", ".yml")) and len(shlex.split(entrypoint)) == 1


def load_task(entrypoint: str) -> Task:
    """Load one task from a YAML path (its ``outputs``/``estimated_runtime`` only matter in a
    chain) or turn a shell command into ``run:``."""
    dag = load_dag(entrypoint)
    if len(dag.tasks) != 1:
        raise SpecError(
            "",
            f"{entrypoint} holds a chain of {len(dag.tasks)} tasks; launch and exec run one task "
            "(skyhop launch --dryrun shows where the chain would run)",
        )
    return dag.tasks[0].task


def load_dag(entrypoint: str) -> Dag:
    """Load a chain of tasks (``---``-separated documents), or one task, as a ``Dag``."""
    if not looks_like_yaml_path(entrypoint):
        return Dag.chain([_validate(Task, {"run": entrypoint})])
    return dag_from_documents(read_yaml_documents(entrypoint), Path.cwd(), task_from_dict, entrypoint)


def task_from_dict(data: object, base: Path) -> Task:
    """Validate a task mapping; relative local paths are resolved against ``base``."""
    if not isinstance(data, Mapping):
        raise SpecError("", f"a task must be a mapping of fields, got {type(data).__name__}")
    task = _validate(Task, dict(data))
    return task.model_copy(
        update={
            "workdir": _local_dir(task.workdir, base, "workdir") if task.workdir else None,
            "file_mounts": {
                remote: _mount_source(entry, base, f"file_mounts.{remote}")
                for remote, entry in task.file_mounts.items()
            },
        }
    )


def _mount_source(entry: str | Storage, base: Path, field: str) -> str | Storage:
    """A local path made absolute (it must exist), a URL as it is, a storage dict's local sources
    made absolute (a single source must be a folder, as in SkyPilot)."""
    if isinstance(entry, str):
        if "://" not in entry:
            return _local_path(entry, base, field)
        scheme, _, rest = entry.partition("://")
        if scheme.lower() not in URL_SCHEMES or not rest.strip("/"):
            raise SpecError(
                field, f"{entry!r} is not a supported URL; use s3://, gs://, az://, r2:// or https://"
            )
        return entry
    if not entry.local_sources:
        return entry
    paths = [_local_path(source, base, f"{field}.source") for source in entry.local_sources]
    if isinstance(entry.source, str):
        if not Path(paths[0]).is_dir():
            raise SpecError(
                f"{field}.source",
                f"{entry.source!r} is a file; a storage source is a folder (write source: "
                f"[{entry.source}] to upload one file, or mount the file directly)",
            )
        return entry.model_copy(update={"source": paths[0]})
    return entry.model_copy(update={"source": paths})


def _local_path(raw: str, base: Path, field: str) -> str:
    path = (base / Path(raw).expanduser()).resolve()
    if not path.exists():
        raise SpecError(field, f"local path {raw!r} does not exist")
    return str(path)


def _local_dir(raw: str, base: Path, field: str) -> str:
    path = _local_path(raw, base, field)
    if not Path(path).is_dir():
        raise SpecError(field, f"{raw!r} is not a directory")
    return path


class TaskOverrides(BaseModel):
    """CLI flags that override fields of the task file (None = keep the file's value)."""

    name: str | None = None
    workdir: str | None = None
    num_nodes: int | None = None
    cpus: str | None = None
    memory: str | None = None
    gpus: str | None = None
    infra: str | None = None
    use_spot: bool | None = None
    envs: list[str] = []

    def apply(self, task: Task) -> Task:
        """Return ``task`` with these overrides; envs with null values must be supplied by now."""
        resources: dict[str, Any] = task.resources.model_dump(exclude_defaults=True)
        flags = (
            ("cpus", "cpus"),
            ("memory", "memory"),
            ("gpus", "accelerators"),
            ("infra", "infra"),
            ("use_spot", "use_spot"),
        )
        changed = {field: getattr(self, flag) for flag, field in flags if getattr(self, flag) is not None}
        resources.update(changed)
        for choices in ("any_of", "ordered"):
            # Each alternative is complete (outer fields merged in), so a flag must reach every one.
            if resources.get(choices):
                resources[choices] = [{**item, **changed} for item in resources[choices]]
        envs = dict(task.envs)
        for item in self.envs:
            key, sep, value = item.partition("=")
            if not sep:
                if key not in os.environ:
                    raise SpecError("--env", f"{key!r} is not set locally; use --env {key}=VALUE")
                value = os.environ[key]
            envs[key] = value
        data: dict[str, Any] = task.model_dump(exclude_defaults=True)
        data.update(resources=resources, envs=envs)
        if self.name is not None:
            data["name"] = self.name
        if self.num_nodes is not None:
            data["num_nodes"] = self.num_nodes
        if self.workdir is not None:
            data["workdir"] = _local_dir(self.workdir, Path.cwd(), "--workdir")
        result = _validate(Task, data)
        missing = sorted(k for k, v in result.envs.items() if v is None)
        if missing:
            raise SpecError(f"envs.{missing[0]}", f"required but not set; pass --env {missing[0]}=VALUE")
        return result


def _validate(model: type[Task], data: dict[str, Any]) -> Task:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise _to_spec_error(exc) from None


def _to_spec_error(exc: ValidationError) -> SpecError:
    """Turn pydantic's first error into one line naming the field path and what is allowed."""
    error = exc.errors()[0]
    loc = [str(part) for part in error["loc"]]
    field = ".".join(loc)
    if error["type"] == "extra_forbidden":
        parent: type[BaseModel] = Resources if "resources" in loc[:-1] else Task
        allowed = sorted(parent.model_fields) + (["cloud", "region", "zone"] if parent is Resources else [])
        hint = did_you_mean(loc[-1], allowed)
        return SpecError(field, f"unknown field{hint}; allowed: {', '.join(allowed)}")
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] not in ("value_error", "assertion_error"):
        message = f"{message}, got {_shown(error.get('input'))}"
    return SpecError(field, message)


_SHOWN_CHARS = 60
_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = _SHOWN_CHARS


def _shown(value: object) -> str:
    """The offending value as the error line quotes it: cut short, so a huge value stays one short line."""
    text = _REPR.repr(value)
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "..."
