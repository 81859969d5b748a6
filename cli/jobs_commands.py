"""``skyhop jobs``: managed jobs, which run to completion through preemptions and failures.

Each job is one durable ``ManagedJobWorkflow``: it brings up a cluster of its own, runs the task,
recovers when the cluster is preempted, and tears it down at the end. Commands import what they
need when they run, so ``--help`` stays fast.
"""

from __future__ import annotations

from typing import Annotated

import typer

from skyhop.cli.catalog_commands import check_minimize
from skyhop.cli.options import (
    Cpus,
    Detach,
    Envs,
    Gpus,
    Infra,
    JsonOpt,
    Memory,
    NumNodes,
    Secrets,
    Workdir,
    Yes,
    task_overrides,
)
from skyhop.cli.output import EXIT_USAGE, fail, info
from skyhop.cli.pool_commands import check_pool_name, pool_app
from skyhop.cli.running import run_command

__all__ = ["jobs_app"]

jobs_app = typer.Typer(
    help="Managed jobs: run to completion on their own clusters, recovering from spot preemptions.",
    no_args_is_help=True,
    rich_markup_mode=None,
)

jobs_app.add_typer(pool_app, name="pool")

JobId = Annotated[int, typer.Argument(help="The managed job's id (see: skyhop jobs queue).", min=1)]


@jobs_app.command("launch")
def launch(
    entrypoint: Annotated[
        list[str],
        typer.Argument(
            help="A task YAML (one task, a --- pipeline, or a group under a header with execution: "
            "parallel), or a shell command to run (quote it).",
            show_default=False,
        ),
    ],
    name: Annotated[str | None, typer.Option("--name", "-n", help="The job's name.")] = None,
    detach: Detach = False,
    yes: Yes = False,
    workdir: Workdir = None,
    num_nodes: NumNodes = None,
    cpus: Cpus = None,
    memory: Memory = None,
    gpus: Gpus = None,
    infra: Infra = None,
    use_spot: Annotated[
        bool | None, typer.Option("--use-spot/--no-use-spot", help="Run on spot instances (or not).")
    ] = None,
    env: Envs = None,
    secret: Secrets = None,
    minimize: Annotated[str, typer.Option("--minimize", help="What to minimise: cost or time.")] = "cost",
    dryrun: Annotated[bool, typer.Option("--dryrun", help="Only optimize and print the plan.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="With --dryrun: print the plan as JSON.")] = False,
    pool: Annotated[
        str | None,
        typer.Option("--pool", "-p", help="Run on an idle worker of this pool (no provisioning, no setup)."),
    ] = None,
    num_jobs: Annotated[
        int,
        typer.Option(
            "--num-jobs",
            help="Launch this many copies; each sees SKYPILOT_JOB_RANK (0, 1, ...) and SKYPILOT_NUM_JOBS.",
            min=1,
            max=1000,
        ),
    ] = 1,
) -> None:
    """Launch a managed job: it recovers from preemptions and its clusters go when it ends.

    Prints the job's status changes and streams its output (every attempt's) until it ends:
    exit 0 once it SUCCEEDED, 1 otherwise. Ctrl-C detaches; the job keeps running. With --pool,
    it waits for an idle worker of the pool and runs there; with --num-jobs, the jobs are
    submitted and not followed.
    """
    from skyhop.cli.jobs_submit import load_job
    from skyhop.spec import SpecError

    if not entrypoint:
        fail("give a task YAML file or a command to run", EXIT_USAGE)
    overrides = task_overrides(
        name=name,
        workdir=workdir,
        num_nodes=num_nodes,
        cpus=cpus,
        memory=memory,
        gpus=gpus,
        infra=infra,
        use_spot=use_spot,
        env=env,
        secret=secret,
    )
    if pool is not None:
        check_pool_name(pool)
    try:
        request, dag = load_job(" ".join(entrypoint), overrides, minimize=check_minimize(minimize), pool=pool)
    except SpecError as exc:
        fail(str(exc), EXIT_USAGE)
    if pool is not None:
        if dryrun:
            info(f"{num_jobs} managed job(s) would run on idle workers of pool {pool!r} (no provisioning)")
            return
        if not yes:
            typer.confirm(
                f"Launch {num_jobs} managed job(s) on pool {pool!r}?", default=True, abort=True, err=True
            )
    else:
        if dryrun or not yes:
            from skyhop.cli.planning import print_dag_plan

            print_dag_plan(dag, request.minimize, as_json=as_json and dryrun, source=" ".join(entrypoint))
        if dryrun:
            return
        if not yes:
            typer.confirm(f"Launch managed job {request.name!r}?", default=True, abort=True, err=True)
    from skyhop.cli.jobs_submit import run_jobs_launch

    run_command(run_jobs_launch(request, detach=detach, num_jobs=num_jobs))


@jobs_app.command("queue")
def queue(
    all_users: Annotated[bool, typer.Option("--all-users", "-a", help="Every user's jobs.")] = False,
    skip_finished: Annotated[
        bool, typer.Option("--skip-finished", "-s", help="Only jobs that have not ended.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """List managed jobs, newest first: your own unless -a."""
    from skyhop.cli.jobs_listing import run_jobs_queue

    run_command(run_jobs_queue(all_users=all_users, skip_finished=skip_finished, as_json=as_json))


@jobs_app.command("logs")
def logs(
    job_id: JobId,
    follow: Annotated[
        bool, typer.Option("--follow/--no-follow", help="Keep streaming until the job ends.")
    ] = False,
) -> None:
    """Print a managed job's output: every attempt, in order, with a line before each recovery."""

    async def show() -> int:
        from skyhop.cli.jobs_follow import follow_job, print_logs
        from skyhop.cli.session import open_client

        client = await open_client()
        if follow:
            await follow_job(client, job_id)
        else:
            await print_logs(client, job_id)
        return 0

    run_command(show())


@jobs_app.command("cancel")
def cancel(
    job_ids: Annotated[list[int] | None, typer.Argument(help="Job ids.", show_default=False)] = None,
    name: Annotated[str | None, typer.Option("--name", "-n", help="Every running job of this name.")] = None,
    all_jobs: Annotated[bool, typer.Option("--all", "-a", help="Every running job of yours.")] = False,
    yes: Yes = False,
) -> None:
    """Cancel managed jobs: each stops its task and ends CANCELLED once its clusters are gone."""
    chosen = sum((bool(job_ids), name is not None, all_jobs))
    if chosen != 1:
        fail("name the jobs to cancel: job ids, -n NAME or --all (one of them)", EXIT_USAGE)
    if not yes and not job_ids:
        what = (
            f"every running managed job named {name!r}" if name is not None else "every running managed job"
        )
        typer.confirm(f"Cancel {what}?", default=True, abort=True, err=True)
    from skyhop.cli.jobs_listing import run_jobs_cancel

    run_command(run_jobs_cancel(job_ids or [], name=name, all_jobs=all_jobs))
