"""The ``skyhop`` command line. Every command imports what it needs when it runs (fast ``--help``)."""

from __future__ import annotations

import re
import signal
import uuid
from typing import TYPE_CHECKING, Annotated, Any

import typer

from skyhop.cli.catalog_commands import check_minimize, register_catalog_commands
from skyhop.cli.config import DEFAULT_CODEC_PORT
from skyhop.cli.jobs_commands import jobs_app
from skyhop.cli.options import (
    Cpus,
    Detach,
    Entrypoint,
    Envs,
    Gpus,
    Infra,
    Memory,
    Name,
    NumNodes,
    Secrets,
    Workdir,
    Yes,
    task_overrides,
)
from skyhop.cli.output import EXIT_DETACHED, EXIT_USAGE, exit_now, fail, info
from skyhop.cli.queue_commands import register_queue_commands
from skyhop.cli.running import run_command
from skyhop.cli.serve_commands import serve_app
from skyhop.cli.ssh_commands import ssh_app
from skyhop.cli.storage_commands import storage_app
from skyhop.cli.volume_commands import volumes_app

if TYPE_CHECKING:
    from skyhop.spec import TaskOverrides

app = typer.Typer(
    name="skyhop",
    help=(
        "Run AI workloads on the cheapest infrastructure that fits, on durable Temporal workflows.\n\n"
        "Quick start: skyhop launch -y examples/hello.yaml"
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)
server_app = typer.Typer(
    help="The embedded Temporal server and worker this machine runs.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(server_app, name="server")
app.add_typer(ssh_app, name="ssh")
app.add_typer(jobs_app, name="jobs")
app.add_typer(storage_app, name="storage")
app.add_typer(volumes_app, name="volumes")
app.add_typer(serve_app, name="serve")
register_catalog_commands(app)

ClusterOpt = Annotated[str | None, typer.Option("--cluster", "-c", help="Cluster name (default: generated).")]


def _check_cluster_name(name: str) -> str:
    from skyhop.contract import CLUSTER_NAME_PATTERN

    if not re.fullmatch(CLUSTER_NAME_PATTERN, name):
        fail(
            f"cluster name {name[:80]!r} is invalid: use lowercase letters, digits and '-', "
            "starting with a letter, at most 63 characters",
            EXIT_USAGE,
        )
    return name


def _not_managed(name: str) -> str:
    """A launch must not take a managed job's cluster name: the job would tear its cluster down."""
    from skyhop.contract.managed_jobs import MANAGED_CLUSTER_PATTERN

    if re.fullmatch(MANAGED_CLUSTER_PATTERN, name):
        fail(
            f"cluster name {name!r} is reserved for managed jobs (job-<n>, job-<n>-<k>); pick another name",
            EXIT_USAGE,
        )
    return name


def _task(entrypoint: list[str], overrides: TaskOverrides) -> Any:
    from skyhop.cli.planning import placeable
    from skyhop.spec import SpecError, load_task

    if not entrypoint:
        fail("give a task YAML file or a command to run", EXIT_USAGE)
    try:
        task = load_task(" ".join(entrypoint), overrides.values(), overrides.secret_values().values())
        if task.pool is not None:
            from skyhop.spec.pool import pool_refusal

            fail(pool_refusal(" ".join(entrypoint), task.pool.size), EXIT_USAGE)
        return placeable(overrides.apply(task))
    except SpecError as exc:
        fail(str(exc), EXIT_USAGE)


def _default_cluster_name() -> str:
    from skyhop.cli.session import current_user

    user = re.sub(r"[^a-z0-9-]", "", current_user().lower())[:20] or "user"
    return f"skyhop-{uuid.uuid4().hex[:4]}-{user}".rstrip("-")


@app.command()
def launch(
    entrypoint: Entrypoint,
    cluster: ClusterOpt = None,
    yes: Yes = False,
    detach: Detach = False,
    dryrun: Annotated[bool, typer.Option("--dryrun", help="Only optimize and print the plan.")] = False,
    name: Name = None,
    workdir: Workdir = None,
    num_nodes: NumNodes = None,
    cpus: Cpus = None,
    memory: Memory = None,
    gpus: Gpus = None,
    infra: Infra = None,
    env: Envs = None,
    secret: Secrets = None,
    idle_minutes: Annotated[
        int | None, typer.Option("--idle-minutes", "-i", help="Autostop after this many idle minutes.", min=0)
    ] = None,
    down: Annotated[bool, typer.Option("--down", help="With -i: tear down instead of stopping.")] = False,
    retry_until_up: Annotated[
        bool,
        typer.Option(
            "--retry-until-up", "-r", help="When every candidate fails, wait (backing off) and search again."
        ),
    ] = False,
    json_output: Annotated[
        bool, typer.Option("--json", help="With --dryrun: print the plan as JSON.")
    ] = False,
    minimize: Annotated[str, typer.Option("--minimize", help="What to minimise: cost or time.")] = "cost",
) -> None:
    """Launch a cluster (or reuse it) and run a task on it.

    Prints each stage (optimize, provision, sync, setup, exec) as it happens, then streams the
    job's output and exits with its exit code. Ctrl-C detaches; the job keeps running.
    """
    overrides = task_overrides(
        name=name,
        workdir=workdir,
        num_nodes=num_nodes,
        cpus=cpus,
        memory=memory,
        gpus=gpus,
        env=env,
        infra=infra,
        secret=secret,
    )
    if dryrun:
        from skyhop.cli.planning import dryrun as plan_only

        plan = plan_only(
            " ".join(entrypoint),
            overrides,
            as_json=json_output,
            minimize=check_minimize(minimize),
        )
        raise typer.Exit(plan)
    task = _task(entrypoint, overrides)
    if task.service is not None:
        info("The task's service: section is used by skyhop serve up (not built yet); launching the task.")
    cluster_name = (
        _not_managed(_check_cluster_name(cluster)) if cluster is not None else _default_cluster_name()
    )
    if not yes:
        from skyhop.cli.planning import print_plan

        if print_plan(task, check_minimize(minimize)) != 0:
            raise typer.Exit(1)
        typer.confirm(f"Launch on cluster {cluster_name!r}?", default=True, abort=True, err=True)
    from skyhop.cli.launching import run_launch

    run_command(
        run_launch(
            task,
            cluster_name,
            detach=detach,
            idle_minutes=idle_minutes,
            down=down,
            retry_until_up=retry_until_up,
            minimize=check_minimize(minimize),
        )
    )


@app.command("exec")
def exec_(
    cluster: Annotated[str, typer.Argument(help="An UP cluster.")],
    entrypoint: Entrypoint,
    detach: Detach = False,
    name: Name = None,
    workdir: Workdir = None,
    num_nodes: NumNodes = None,
    cpus: Cpus = None,
    memory: Memory = None,
    gpus: Gpus = None,
    env: Envs = None,
    secret: Secrets = None,
) -> None:
    """Run a task on an existing UP cluster: no provisioning, no setup; the workdir is synced."""
    task = _task(
        entrypoint,
        task_overrides(
            name=name,
            workdir=workdir,
            num_nodes=num_nodes,
            cpus=cpus,
            memory=memory,
            gpus=gpus,
            env=env,
            secret=secret,
        ),
    )
    from skyhop.cli.launching import run_exec

    run_command(run_exec(task, _check_cluster_name(cluster), detach=detach))


@app.command()
def status(
    json_output: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    refresh: Annotated[
        bool, typer.Option("--refresh", "-r", help="Ask the providers for the nodes' real state first.")
    ] = False,
) -> None:
    """List clusters: name, infra, resources, status, launch time, autostop."""
    from skyhop.cli.clusters import run_status

    run_command(run_status(json_output, refresh=refresh))


@app.command()
def logs(
    cluster: Annotated[str, typer.Argument(help="Cluster name.")],
    job_id: Annotated[int | None, typer.Argument(help="Job id (default: the latest job).")] = None,
    follow: Annotated[
        bool, typer.Option("--follow/--no-follow", help="Keep streaming until the job ends.")
    ] = True,
    tail: Annotated[
        int | None,
        typer.Option("--tail", help="Start from the last N lines instead of the beginning.", min=0),
    ] = None,
    status_only: Annotated[
        bool,
        typer.Option(
            "--status",
            help="Print the job's status only; exit 0 succeeded, 100 failed, 101 not ended, 102 no such job, "
            "103 cancelled.",
        ),
    ] = False,
) -> None:
    """Print a job's output; exits with the job's exit code once it has ended."""

    async def show() -> int:
        from skyhop.cli.launching import exit_code_of
        from skyhop.cli.logs import follow_cluster, print_job_status
        from skyhop.cli.session import open_client

        if status_only:
            return await print_job_status(await open_client(), cluster, job_id)
        job = await follow_cluster(await open_client(), cluster, job_id, follow=follow, tail_lines=tail)
        return exit_code_of(job) if job is not None and job.status.done else 0

    run_command(show())


@app.command("down")
def down_(
    clusters: Annotated[
        list[str] | None, typer.Argument(help="Clusters to tear down.", show_default=False)
    ] = None,
    all_clusters: Annotated[bool, typer.Option("--all", "-a", help="Tear down every cluster.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Tear down clusters: their nodes and everything running on them are removed."""
    if not clusters and not all_clusters:
        fail("name a cluster, or pass --all", EXIT_USAGE)
    if not yes:
        what = "every cluster" if all_clusters else ", ".join(clusters or [])
        typer.confirm(f"Tear down {what}?", default=False, abort=True, err=True)
    from skyhop.cli.queue_commands import run_down

    run_command(run_down(clusters or [], all_clusters))


@app.command()
def check(json_output: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """Check which providers' credentials are found and usable; only enabled ones are launch candidates."""
    from skyhop.cli.check_commands import run_check

    exit_now(run_check(json_output))  # the ssh check may have left a Temporal client behind


@server_app.command("status")
def server_status() -> None:
    """Show the Temporal address, namespace, Web UI and worker of this machine's skyhop."""
    from skyhop.cli.server import run_server_status

    raise typer.Exit(run_server_status())


@server_app.command("stop")
def server_stop() -> None:
    """Stop the embedded worker and Temporal server (clusters and their jobs keep running)."""
    from skyhop.cli.server import run_server_stop

    raise typer.Exit(run_server_stop())


@server_app.command("codec")
def server_codec(
    port: Annotated[int, typer.Option(help="Loopback port to listen on.")] = DEFAULT_CODEC_PORT,
    origin: Annotated[
        list[str] | None,
        typer.Option(
            help="Another Web UI origin it answers (the embedded UI's is always), e.g. https://ui.example.com."
        ),
    ] = None,
) -> None:
    """Serve Temporal's codec protocol on 127.0.0.1, so the Web UI and `temporal --codec-endpoint`
    show skyhop's encrypted payloads (the embedded server's worker serves one too)."""
    from skyhop.cli.server import run_server_codec

    run_command(run_server_codec(port, origin or []))


@server_app.command("start")
def server_start() -> None:
    """Start the embedded Temporal server and worker now (any command does so when needed)."""
    from skyhop.cli.server import run_server_start

    run_command(run_server_start())


@app.command()
def worker(
    address: Annotated[str | None, typer.Option(help="Temporal host:port (default: from config).")] = None,
) -> None:
    """Run a skyhop worker in the foreground, on the configured Temporal.

    With no Temporal configured, it runs against the embedded server (started if needed), next to
    the embedded background worker. Stop it with Ctrl-C or SIGTERM.
    """
    from skyhop.cli.worker_process import main as worker_main

    worker_main(["--address", address] if address else [])


register_queue_commands(app)


def main() -> None:
    """Console entry point.

    Ctrl-C outside a command's coroutine (a confirmation prompt, a synchronous command, imports)
    is the same one line and exit code as inside it (``run_command``), not click's ``Aborted!`` and 1.
    """
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _interrupted)
    app()


def _interrupted(signum: int, frame: object) -> None:
    info("\nInterrupted.")
    exit_now(EXIT_DETACHED)
