"""``skyhop jobs pool``: pools of workers that managed jobs run on (SkyPilot's pools).

A pool file is a task with a ``pool: {workers: N}`` section, resources and setup: ``apply`` keeps N
worker clusters of it up with setup done (one durable ``PoolWorkflow``), and ``skyhop jobs launch
--pool NAME job.yaml`` runs jobs on idle workers with no provisioning and no setup of their own.
Commands import what they need when they run, so ``--help`` stays fast.
"""

from __future__ import annotations

from typing import Annotated

import typer

from skyhop.cli.options import Envs, JsonOpt, Secrets, Yes, task_overrides
from skyhop.cli.output import EXIT_USAGE, fail
from skyhop.cli.running import run_command

__all__ = ["check_pool_name", "pool_app"]

pool_app = typer.Typer(
    help="Pools: worker clusters kept up with setup done, for managed jobs (jobs launch --pool NAME).",
    no_args_is_help=True,
    rich_markup_mode=None,
)

PoolName = Annotated[str, typer.Option("--pool", "-p", help="The pool's name.", show_default=False)]


def check_pool_name(name: str) -> str:
    """``name``, or exit 2 saying what a pool name may be."""
    import re

    from skyhop.contract.pools import POOL_NAME_PATTERN

    if not re.fullmatch(POOL_NAME_PATTERN, name):
        fail(
            f"pool name {name[:80]!r}: lowercase letters, digits and '-', starting with a letter, "
            "at most 42 characters",
            EXIT_USAGE,
        )
    return name


@pool_app.command("apply")
def apply(
    pool_yaml: Annotated[str, typer.Argument(help="A task YAML with a pool: section.", show_default=False)],
    pool: PoolName,
    workers: Annotated[
        int | None, typer.Option("--workers", help="Workers, instead of the file's pool.workers.", min=0)
    ] = None,
    yes: Yes = False,
    env: Envs = None,
    secret: Secrets = None,
) -> None:
    """Bring a pool up, or change it: its workers' task, and how many there are.

    New workers are brought up and set up; with fewer, idle workers go first and busy ones once
    their job ends; with a changed task, workers of the old one are replaced once idle.
    """
    from skyhop.cli.planning import placeable, print_plan
    from skyhop.spec import SpecError, load_task
    from skyhop.spec.limits import MAX_POOL_WORKERS

    name = check_pool_name(pool)
    overrides = task_overrides(
        name=None, workdir=None, num_nodes=None, cpus=None, memory=None, gpus=None, env=env, secret=secret
    )
    try:
        task = placeable(
            overrides.apply(load_task(pool_yaml, overrides.values(), overrides.secret_values().values()))
        )
    except SpecError as exc:
        fail(str(exc), EXIT_USAGE)
    if task.pool is None:
        fail(f"{pool_yaml} has no pool: section; add pool: {{workers: N}}", EXIT_USAGE)
    size = task.pool.size if workers is None else workers
    if size > MAX_POOL_WORKERS:
        fail(f"--workers: at most {MAX_POOL_WORKERS}, got {size}", EXIT_USAGE)
    if not yes:
        print_plan(task)
        typer.confirm(f"Apply pool {name!r} with {size} workers?", default=True, abort=True, err=True)
    from skyhop.cli.pools import run_pool_apply

    run_command(run_pool_apply(name, task, size))


@pool_app.command("status")
def status(
    name: Annotated[str | None, typer.Argument(help="Only this pool.", show_default=False)] = None,
    as_json: JsonOpt = False,
) -> None:
    """Pools and their workers: each worker's cluster, status and the job using it."""
    from skyhop.cli.pools import run_pool_status

    run_command(run_pool_status(name, as_json=as_json))


@pool_app.command("down")
def down(
    name: Annotated[str, typer.Argument(help="The pool to take down.", show_default=False)],
    yes: Yes = False,
) -> None:
    """Take a pool down: its jobs are cancelled and every worker is torn down."""
    check_pool_name(name)
    if not yes:
        typer.confirm(
            f"Take pool {name!r} down (its running jobs are cancelled)?", default=True, abort=True, err=True
        )
    from skyhop.cli.pools import run_pool_down

    run_command(run_pool_down(name))
