"""``Dag``: tasks that hand data to each other, placed jointly so the data moves cheaply.

A YAML file with several documents separated by ``---`` is a chain: an optional header document
holding ``name`` and ``execution``, then one task per document, each feeding the next. A header
with ``execution: parallel`` makes them a group instead (SkyPilot's job groups): a managed job runs
them at once, and no data flows between them; its header may also say which tasks are primary,
how the others are stopped, and where the tasks go (``spec.job_group``). Per task, two fields
beside SkyPilot's task fields feed the optimizer:

* ``outputs``: what the task hands to the next one, ``{path: GB}`` (SkyPilot's form) or a number
  of GB; moving it between clouds or regions costs egress.
* ``inputs``: what the task reads, ``{path: GB}``; read from a bucket on another cloud
  (``s3://`` is AWS, ``gs://`` GCP, ``https://<account>.blob.core.windows.net`` Azure), it costs that
  cloud's egress, so the optimizer weighs it like SkyPilot's.
* ``estimated_runtime``: hours the task runs, a number or ``{ACCELERATOR: hours, default: hours}``;
  ``--minimize time`` picks by it and cost is price x hours. Default: 1 hour everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from skyhop.spec.errors import SpecError
from skyhop.spec.job_group import GROUP_FIELDS, JobGroup, job_group_from_header
from skyhop.spec.limits import MAX_CHAIN_TASKS, MAX_NAME_CHARS
from skyhop.spec.task import Task

__all__ = ["DEFAULT_RUNTIME_HOURS", "Dag", "DagTask", "Execution", "dag_from_documents", "input_cloud"]

DEFAULT_RUNTIME_HOURS = 1.0
"""Runtime assumed when a task gives no estimate (SkyPilot's default too)."""


_BUCKET_CLOUDS = {"s3": "aws", "gs": "gcp"}


def input_cloud(path: str) -> str | None:
    """The cloud a bucket URL is stored on (SkyPilot's rule: by its scheme), None for a local path."""
    scheme, sep, rest = path.partition("://")
    if not sep:
        return None
    if scheme == "https" and ".blob.core.windows.net" in rest.split("/")[0]:
        return "azure"
    return _BUCKET_CLOUDS.get(scheme.lower(), scheme.lower())


class Execution(StrEnum):
    """How a multi-task file's tasks run: the header document's ``execution``."""

    SERIAL = "serial"
    """In order, each feeding the next (a chain); the default."""
    PARALLEL = "parallel"
    """All at once, as one group."""


class DagTask(BaseModel):
    """A task with what the optimizer needs to place it among others."""

    model_config = ConfigDict(frozen=True)

    task: Task
    outputs_gb: float = Field(default=0.0, ge=0, strict=True)
    """GB handed to each task that follows it."""
    inputs_gb: float = Field(default=0.0, ge=0, strict=True)
    """GB the task reads from ``inputs_cloud``."""
    inputs_cloud: str | None = None
    """The cloud whose bucket holds the inputs; None for a local path (uploads cost nothing)."""
    estimated_runtime: dict[str, float] = {}
    """Hours by accelerator name (upper case), ``DEFAULT`` for anything else."""

    @model_validator(mode="before")
    @classmethod
    def _inputs(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "inputs" not in data:
            return data
        data = dict(data)
        inputs = data.pop("inputs")
        if not isinstance(inputs, Mapping) or len(inputs) != 1:
            raise ValueError("inputs must be one {path: GB}, like {s3://bucket/data: 100}")
        ((path, size),) = inputs.items()
        data["inputs_gb"] = size
        data["inputs_cloud"] = input_cloud(str(path))
        return data

    @field_validator("outputs_gb", "inputs_gb", mode="before")
    @classmethod
    def _sum_outputs(cls, value: object) -> object:
        if isinstance(value, Mapping):
            sizes = list(value.values())
            if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in sizes):
                raise ValueError("outputs must map paths to sizes in GB, like {/data/ckpt: 50}")
            return float(sum(sizes))
        return value

    @field_validator("estimated_runtime", mode="before")
    @classmethod
    def _runtime_by_accelerator(cls, value: object) -> object:
        if isinstance(value, int | float) and not isinstance(value, bool):
            value = {"default": value}
        if not isinstance(value, Mapping):
            raise ValueError("estimated_runtime must be hours, or {ACCELERATOR: hours, default: hours}")
        hours = {}
        for name, amount in value.items():
            if isinstance(amount, bool) or not isinstance(amount, int | float) or amount <= 0:
                raise ValueError(f"estimated_runtime for {name!r} must be a positive number of hours")
            hours[str(name).upper()] = float(amount)
        return hours

    def hours_on(self, accelerators: Mapping[str, float]) -> float:
        """Estimated hours on a node with ``accelerators``."""
        for name in accelerators:
            if name.upper() in self.estimated_runtime:
                return self.estimated_runtime[name.upper()]
        return self.estimated_runtime.get("DEFAULT", DEFAULT_RUNTIME_HOURS)


class Dag(BaseModel):
    """Tasks and the edges along which data flows (``edges[k] = (from, to)``, task indexes)."""

    model_config = ConfigDict(frozen=True)

    name: str | None = None
    tasks: list[DagTask]
    edges: list[tuple[int, int]] = []
    execution: Execution = Execution.SERIAL
    group: JobGroup | None = None
    """A parallel group's header fields; None for a chain."""

    @model_validator(mode="after")
    def _check_edges(self) -> Dag:
        if not self.tasks:
            raise ValueError("a DAG needs at least one task")
        for src, dst in self.edges:
            if not (0 <= src < len(self.tasks) and 0 <= dst < len(self.tasks)) or src >= dst:
                raise ValueError(f"edge {src}->{dst} must join two tasks, earlier to later")
        return self

    @classmethod
    def chain(cls, tasks: Sequence[Task | DagTask], name: str | None = None) -> Dag:
        """Tasks each feeding the next (what a multi-document YAML means)."""
        nodes = [t if isinstance(t, DagTask) else DagTask(task=t) for t in tasks]
        return cls(name=name, tasks=nodes, edges=[(i, i + 1) for i in range(len(nodes) - 1)])


_DAG_KEYS = {"outputs": "outputs_gb", "inputs": "inputs", "estimated_runtime": "estimated_runtime"}
_HEADER_KEYS = ("name", "execution")


def dag_from_documents(documents: list[Any], base: Path, validate_task: Any, source: str) -> Dag:
    """A chain (or a parallel group) from a YAML file's documents; ``validate_task(mapping, base)``
    checks each task."""
    from pydantic import ValidationError

    docs = list(documents)
    header: Mapping[Any, Any] = {}
    name, execution = None, Execution.SERIAL
    if _is_header(docs):
        header = docs.pop(0)
        name, execution = _read_header(header)
    if not docs:
        raise SpecError("", f"{source}: no task document")
    if len(docs) > MAX_CHAIN_TASKS:
        raise SpecError("", f"{source}: a chain of {len(docs)} tasks; at most {MAX_CHAIN_TASKS}")
    nodes = []
    for index, doc in enumerate(docs):
        where = f"task {index + 1}: " if len(docs) > 1 else ""
        if not isinstance(doc, Mapping):
            raise SpecError("", f"{where}a task must be a mapping of fields, got {type(doc).__name__}")
        extras = {_DAG_KEYS[k]: v for k, v in doc.items() if k in _DAG_KEYS}
        try:
            task = validate_task({k: v for k, v in doc.items() if k not in _DAG_KEYS}, base)
        except SpecError as exc:
            raise type(exc)(exc.field, f"{where}{str(exc).removeprefix(f'{exc.field}: ')}") from None
        try:
            nodes.append(DagTask(task=task, **extras))
        except ValidationError as exc:
            error = exc.errors()[0]
            loc = str(error["loc"][0]) if error["loc"] else "inputs"
            field = {v: k for k, v in _DAG_KEYS.items()}.get(loc, loc.removesuffix("_gb"))
            raise SpecError(field, where + error["msg"].removeprefix("Value error, ")) from None
    if execution == Execution.PARALLEL:
        group = job_group_from_header(header, name, [node.task.name for node in nodes])
        return Dag(name=name, tasks=nodes, execution=execution, group=group)
    return Dag.chain(nodes, name=name)


def _is_header(docs: list[Any]) -> bool:
    """A first document with ``execution`` or a job group's field, or holding only ``name`` in
    front of tasks, is the header."""
    first = docs[0] if docs else None
    if not isinstance(first, Mapping):
        return False
    return any(key in first for key in ("execution", *GROUP_FIELDS)) or (
        len(docs) > 1 and set(first) == {"name"}
    )


def _read_header(header: Mapping[Any, Any]) -> tuple[str | None, Execution]:
    """The header's name and execution; a job group's own fields are read by ``job_group_from_header``."""
    fields = (*_HEADER_KEYS, *GROUP_FIELDS)
    extra = sorted(str(key) for key in header if key not in fields)
    if extra:
        raise SpecError(extra[0], f"unknown field in the header document; it holds only {', '.join(fields)}")
    name = None if header.get("name") is None else str(header["name"])
    if name is not None and len(name) > MAX_NAME_CHARS:
        raise SpecError("name", f"at most {MAX_NAME_CHARS} characters, got {len(name)}")
    raw = header.get("execution", Execution.SERIAL.value)
    allowed = [e.value for e in Execution]
    if raw not in allowed:
        raise SpecError("execution", f"must be one of {', '.join(allowed)}, got {str(raw)[:60]!r}")
    grouped = next((field for field in GROUP_FIELDS if field in header), None)
    if grouped is not None and raw != Execution.PARALLEL:
        raise SpecError(grouped, "only a job group has it: add execution: parallel to the header")
    return name, Execution(raw)
