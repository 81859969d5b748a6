"""Options several commands share (``launch``, ``exec``, ``jobs launch``): one definition each."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from skyhop.spec import TaskOverrides

__all__ = [
    "Cpus",
    "Detach",
    "Entrypoint",
    "Envs",
    "Gpus",
    "Infra",
    "JsonOpt",
    "Memory",
    "Name",
    "NumNodes",
    "Secrets",
    "Workdir",
    "Yes",
    "task_overrides",
]

Entrypoint = Annotated[
    list[str],
    typer.Argument(help="A task YAML file, or a shell command to run (quote it).", show_default=False),
]
Cpus = Annotated[str | None, typer.Option(help="vCPUs per node: 4 (exactly) or 4+ (at least).")]
Memory = Annotated[str | None, typer.Option(help="Memory per node in GiB: 16, 16+, or x4 (per vCPU).")]
Gpus = Annotated[str | None, typer.Option(help="Accelerators per node, e.g. A100:8.")]
NumNodes = Annotated[int | None, typer.Option("--num-nodes", help="Number of nodes.", min=1)]
Envs = Annotated[list[str] | None, typer.Option("--env", help="K=V (or K to copy it from here); repeatable.")]
Secrets = Annotated[
    list[str] | None,
    typer.Option("--secret", help="NAME=VALUE (or NAME to copy it from here): like --env, never displayed."),
]
Workdir = Annotated[str | None, typer.Option(help="Local folder to sync to every node.")]
Name = Annotated[str | None, typer.Option("--name", "-n", help="Task name.")]
Detach = Annotated[bool, typer.Option("--detach", "-d", help="Return once the job is submitted.")]
Infra = Annotated[str | None, typer.Option("--infra", "--cloud", help="cloud[/region[/zone]], e.g. local.")]
Yes = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]


def task_overrides(
    *,
    name: str | None,
    workdir: str | None,
    num_nodes: int | None,
    cpus: str | None,
    memory: str | None,
    gpus: str | None,
    env: list[str] | None,
    secret: list[str] | None = None,
    infra: str | None = None,
    use_spot: bool | None = None,
) -> TaskOverrides:
    """The task-field flags as ``TaskOverrides``: every command that takes them builds them here.

    Named parameters, not ``**flags``: a flag passed under a wrong name is a type error, not an
    override silently dropped.
    """
    from skyhop.spec import TaskOverrides

    return TaskOverrides(
        name=name,
        workdir=workdir,
        num_nodes=num_nodes,
        cpus=cpus,
        memory=memory,
        gpus=gpus,
        infra=infra,
        use_spot=use_spot,
        envs=env or [],
        secrets=secret or [],
    )
