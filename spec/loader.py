"""Reading a task from YAML or a shell command, and applying CLI overrides.

Everything a user can get wrong is checked here, before any workflow starts: a workflow given
bad input would retry its first task forever, so bad input must never reach one.
"""

from __future__ import annotations

import os
import re
import reprlib
import shlex
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, get_args

from pydantic import BaseModel, ValidationError

from skyhop.spec.accelerator_names import with_skypilot_names
from skyhop.spec.dag import Dag, dag_from_documents
from skyhop.spec.errors import SpecError, did_you_mean, redacted
from skyhop.spec.refused import CONFIG_ACTED_ON, check_refused, check_store_clouds, drop_missing_clouds
from skyhop.spec.resources import Resources
from skyhop.spec.storage import NO_HUGGING_FACE, URL_SCHEMES, Storage
from skyhop.spec.task import Task
from skyhop.spec.yaml_reader import read_yaml_documents

__all__ = ["TaskOverrides", "load_dag", "load_task", "looks_like_yaml_path", "task_from_dict"]


def looks_like_yaml_path(entrypoint: str) -> bool:
    """Whether the CLI entrypoint names a YAML file (otherwise it is a shell command)."""
    return entrypoint.endswith((".yaml", ".yml")) and len(shlex.split(entrypoint)) == 1


def load_task(
    entrypoint: str, envs: Mapping[str, str] | None = None, secret_values: Iterable[str] = ()
) -> Task:
    """Load one task from a YAML path (its ``outputs``/``estimated_runtime`` only matter in a
    chain) or turn a shell command into ``run:``."""
    dag = load_dag(entrypoint, envs, secret_values)
    if len(dag.tasks) != 1:
        kind = "job group" if dag.execution == "parallel" else "pipeline"
        raise SpecError(
            "",
            f"{entrypoint} holds a {kind} of {len(dag.tasks)} tasks; launch and exec run one task: "
            "run it with skyhop jobs launch (skyhop launch --dryrun plans each task)",
        )
    return dag.tasks[0].task


def load_dag(
    entrypoint: str, envs: Mapping[str, str] | None = None, secret_values: Iterable[str] = ()
) -> Dag:
    """Load a chain of tasks (``---``-separated documents), or one task, as a ``Dag``.

    ``envs`` (the ``--env``/``--secret`` values) win over the file's when ``${VAR}`` is filled in;
    ``secret_values`` (the ``--secret`` ones) never appear in an error.
    """
    hidden = list(secret_values)
    if not looks_like_yaml_path(entrypoint):
        return Dag.chain([_validate(Task, {"run": entrypoint})])

    def validate(data: object, base: Path) -> Task:
        return task_from_dict(data, base, envs, hidden)

    return dag_from_documents(read_yaml_documents(entrypoint), Path.cwd(), validate, entrypoint)


_NO_EFFECT_FIELDS = ("_metadata",)
"""SkyPilot's record of where a file came from: informational, nothing to run."""
_SUBSTITUTED = ("workdir", "file_mounts", "service")
"""Fields whose strings get the task's envs and secrets filled in (SkyPilot's rule)."""
_VARIABLE = re.compile(r"\$\{?\b([a-zA-Z_][a-zA-Z0-9_]*)\b\}?")


def fill_in_envs(value: Any, envs: Mapping[str, str]) -> Any:
    """``$VAR`` and ``${VAR}`` replaced by their values in every string (mapping keys too) of ``value``;
    a variable not in ``envs`` stays as written."""
    if isinstance(value, str):
        return _VARIABLE.sub(lambda m: envs.get(m.group(1), m.group(0)), value)
    if isinstance(value, Mapping):
        return {fill_in_envs(k, envs): fill_in_envs(v, envs) for k, v in value.items()}
    if isinstance(value, list):
        return [fill_in_envs(item, envs) for item in value]
    return value


def _known_values(data: Mapping[str, Any], overrides: Mapping[str, str]) -> dict[str, str]:
    values: dict[str, str] = {}
    for field in ("envs", "secrets"):
        found = data.get(field)
        if isinstance(found, Mapping):
            values.update({str(k): str(v) for k, v in found.items() if v is not None})
    return {**values, **overrides}


def task_from_dict(
    data: object, base: Path, envs: Mapping[str, str] | None = None, secret_values: Iterable[str] = ()
) -> Task:
    """Validate a task mapping; relative local paths are resolved against ``base``.

    Fields skyhop refuses are named first; alternatives on clouds skyhop lacks are dropped.
    """
    if not isinstance(data, Mapping):
        raise SpecError("", f"a task must be a mapping of fields, got {type(data).__name__}")
    secrets = data.get("secrets")
    hidden = [*(secrets.values() if isinstance(secrets, Mapping) else []), *(envs or {}).values()]
    try:
        return _task_from_mapping(data, base, envs or {})
    except SpecError as exc:
        # ${VAR} may have put a secret into a path an error quotes; --env values are hidden alike,
        # since the overrides do not say which of them are secrets
        raise type(exc)(
            exc.field, redacted(str(exc).removeprefix(f"{exc.field}: "), map(str, hidden))
        ) from None


def _task_from_mapping(data: Mapping[str, Any], base: Path, envs: Mapping[str, str]) -> Task:
    check_refused(data)
    raw = {k: v for k, v in data.items() if k not in (*_NO_EFFECT_FIELDS, "config")}
    if isinstance(raw.get("resources"), Mapping):
        raw["resources"] = with_skypilot_names(drop_missing_clouds(raw["resources"]))
    if isinstance(data.get("config"), Mapping):
        raw["config"] = {k: v for k, v in data["config"].items() if k in CONFIG_ACTED_ON}
    if raw.get("api_server_access") is False:
        raw.pop("api_server_access")
    values = _known_values(raw, envs)
    for field in _SUBSTITUTED:
        if raw.get(field) is not None:
            raw[field] = fill_in_envs(raw[field], values)
    check_store_clouds(raw.get("file_mounts"))  # after ${VAR}: a bucket URL may come from envs
    task = _validate(Task, raw)
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
        if scheme.lower() == "hf":
            raise SpecError(field, f"{entry!r}: {NO_HUGGING_FACE}")
        if scheme.lower() not in URL_SCHEMES or not rest.strip("/"):
            raise SpecError(
                field,
                f"{entry!r} is not a supported URL; use s3://, gs://, az://, r2://, minio:// or https://",
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
    secrets: list[str] = []
    """``--secret NAME=VALUE`` (or ``NAME``, copied from this environment)."""

    def values(self) -> dict[str, str]:
        """What ``--env`` and ``--secret`` set, to fill ``${VAR}`` in the file's paths."""
        return {**_assignments(self.envs, "--env"), **self.secret_values()}

    def secret_values(self) -> dict[str, str]:
        """What ``--secret`` sets: values no output may show."""
        return _assignments(self.secrets, "--secret")

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
        changed = with_skypilot_names(changed)
        resources.update(changed)
        for choices in ("any_of", "ordered"):
            # Each alternative is complete (outer fields merged in), so a flag must reach every one.
            if resources.get(choices):
                resources[choices] = [{**item, **changed} for item in resources[choices]]
        envs = {**task.envs, **_assignments(self.envs, "--env")}
        secrets = {**task.secrets, **_assignments(self.secrets, "--secret")}
        data: dict[str, Any] = task.model_dump(exclude_defaults=True)
        data.update(resources=resources, envs=envs, secrets=secrets)
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
        unset = sorted(k for k, v in result.secrets.items() if v is None)
        if unset:
            raise SpecError(f"secrets.{unset[0]}", f"required but not set; pass --secret {unset[0]}=VALUE")
        return result


def _assignments(items: list[str], flag: str) -> dict[str, str]:
    """``K=V`` flags as a mapping; a bare ``K`` takes this environment's value."""
    values = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            if key not in os.environ:
                raise SpecError(flag, f"{key!r} is not set locally; use {flag} {key}=VALUE")
            value = os.environ[key]
        values[key] = value
    return values


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
        parent = _model_at(loc)
        also = {Task: _ALSO_ALLOWED_TASK, Resources: _ALSO_ALLOWED_RESOURCES}.get(parent, ())
        allowed = sorted({*parent.model_fields, *also})
        hint = did_you_mean(loc[-1], allowed)
        return SpecError(field, f"unknown field{hint}; allowed: {', '.join(allowed)}")
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] not in ("value_error", "assertion_error") and loc[:1] != ["secrets"]:
        message = f"{message}, got {_shown(error.get('input'))}"
    return SpecError(field, message)


def _model_at(loc: list[str]) -> type[BaseModel]:
    """The model a field path ends in (``service.replica_policy.x`` is in ``ReplicaPolicy``), so an
    unknown nested field lists its own siblings; mapping keys and list indexes are stepped over."""
    model: type[BaseModel] = Task
    for part in loc[:-1]:
        field = model.model_fields.get(part)
        nested = _nested_model(field.annotation) if field is not None else None
        if nested is not None:
            model = nested
    return model


def _nested_model(annotation: object) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        if (found := _nested_model(arg)) is not None:
            return found
    return None


_ALSO_ALLOWED_TASK = ("inputs", "outputs", "estimated_runtime", "_metadata", "api_server_access")
"""Task fields read before validation (or by the chain), beside the model's own."""
_ALSO_ALLOWED_RESOURCES = ("cloud", "region", "zone", "gpus")
"""SkyPilot's legacy location keys and its alias of ``accelerators``, folded in before validation (the
deprecated ``ephemeral_storage`` and ``spot_recovery`` go unlisted: the line stays short)."""

_SHOWN_CHARS = 60
_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = _SHOWN_CHARS


def _shown(value: object) -> str:
    """The offending value as the error line quotes it: cut short, so a huge value stays one short line."""
    text = _REPR.repr(value)
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "..."
