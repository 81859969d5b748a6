"""``skyhop serve``: services, each one endpoint in front of replicas that come and go.

Each service is one durable ``ServiceWorkflow`` (id ``service:<name>``): it launches every replica
as a cluster of its own, probes them, replaces those that fail, scales on the load balancer's
request counts, and keeps the service's load balancer (a process next to the worker) pointed at
the READY ones. Commands import what they need when they run, so ``--help`` stays fast.
"""

from __future__ import annotations

from typing import Annotated

import typer

from skyhop.cli.options import Envs, JsonOpt, Secrets, Yes, task_overrides
from skyhop.cli.output import EXIT_USAGE, fail
from skyhop.cli.running import run_command

__all__ = ["serve_app"]

serve_app = typer.Typer(
    help="Services: replicas behind one endpoint, probed, replaced when they fail, autoscaled on QPS.",
    no_args_is_help=True,
    rich_markup_mode=None,
)

ServiceYaml = Annotated[str, typer.Argument(help="A task YAML with a service: section.", show_default=False)]
ServiceName = Annotated[str, typer.Argument(help="The service's name (see: skyhop serve status).")]


def _load(path: str, env: list[str] | None, secret: list[str] | None) -> object:
    from skyhop.cli.planning import placeable
    from skyhop.serve.service_spec import check_service
    from skyhop.spec import SpecError, load_task

    overrides = task_overrides(
        name=None, workdir=None, num_nodes=None, cpus=None, memory=None, gpus=None, env=env, secret=secret
    )
    try:
        task = placeable(
            overrides.apply(load_task(path, overrides.values(), overrides.secret_values().values()))
        )
        check_service(task)
    except SpecError as exc:
        fail(str(exc), EXIT_USAGE)
    return task


@serve_app.command("up")
def up(
    task_yaml: ServiceYaml,
    name: Annotated[
        str | None, typer.Option("--name", "-n", help="The service's name (default: the task's).")
    ] = None,
    yes: Yes = False,
    env: Envs = None,
    secret: Secrets = None,
) -> None:
    """Start a service: its load balancer, then its replicas; prints the endpoint.

    The replicas' run must listen on $SKYHOP_SERVE_PORT (the service's ports; on this machine each
    replica gets a free port of its own). Follow it with: skyhop serve status NAME.
    """
    import re
    import uuid

    from skyhop.contract.serve import MAX_SERVICE_NAME_CHARS, SERVICE_NAME_PATTERN
    from skyhop.spec import Task

    task = _load(task_yaml, env, secret)
    assert isinstance(task, Task)
    service = name or task.name or f"service-{uuid.uuid4().hex[:4]}"
    if not re.fullmatch(SERVICE_NAME_PATTERN, service):
        fail(
            f"service name {service!r}: lowercase letters, digits and '-', starting with a letter, "
            f"at most {MAX_SERVICE_NAME_CHARS} characters",
            EXIT_USAGE,
        )
    if not yes:
        typer.confirm(f"Start service {service!r}?", default=True, abort=True, err=True)
    from skyhop.cli.serving import run_serve_up

    run_command(run_serve_up(service, task))


@serve_app.command("status")
def status(
    name: Annotated[str | None, typer.Argument(help="Only this service.", show_default=False)] = None,
    endpoint: Annotated[bool, typer.Option("--endpoint", help="Print only the endpoint.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Services and their replicas: status, endpoint, each replica's version, infra and state."""
    from skyhop.cli.serving import run_serve_status

    run_command(run_serve_status(name, endpoint=endpoint, as_json=as_json))


@serve_app.command("update")
def update(
    name: ServiceName,
    task_yaml: ServiceYaml,
    mode: Annotated[
        str,
        typer.Option(
            "--mode",
            help="rolling: one new replica at a time, an old one goes as each is READY. "
            "blue_green: the new version's whole set comes up READY, then traffic switches to it at "
            "once and the old replicas go (needs room for both sets within max_replicas).",
        ),
    ] = "rolling",
    env: Envs = None,
    secret: Secrets = None,
) -> None:
    """Move a service to a new version; new replicas are READY before old ones go.

    If the new version's replicas keep failing before they are READY, the update rolls back by
    itself (skyhop serve status says so).
    """
    from skyhop.cli.serving import run_serve_update
    from skyhop.contract.serve import UpdateMode
    from skyhop.spec import Task

    try:
        chosen = UpdateMode(mode)
    except ValueError:
        fail(f"--mode {mode!r}: one of {', '.join(m.value for m in UpdateMode)}", EXIT_USAGE)
    task = _load(task_yaml, env, secret)
    assert isinstance(task, Task)
    run_command(run_serve_update(name, task, chosen))


@serve_app.command("logs")
def logs(
    name: ServiceName,
    replica_id: Annotated[
        str | None,
        typer.Argument(
            metavar="[REPLICA_ID]",
            help="This replica's run (its ID in skyhop serve status; default: the first replica).",
            show_default=False,
        ),
    ] = None,
    replica: Annotated[str | None, typer.Option("--replica", hidden=True, show_default=False)] = None,
    load_balancer: Annotated[
        bool, typer.Option("--load-balancer", help="The load balancer's log instead of a replica's.")
    ] = False,
    follow: Annotated[
        bool, typer.Option("--follow/--no-follow", help="Keep streaming (Ctrl-C stops).")
    ] = False,
) -> None:
    """Print a replica's output (its run's log), or the load balancer's log.

    skyhop serve logs NAME 2 prints replica 2's; skyhop serve logs NAME --load-balancer the load
    balancer's.
    """
    if replica_id is not None and replica is not None and replica_id != replica:
        fail(f"replica {replica_id} or replica {replica}: give one REPLICA_ID", EXIT_USAGE)
    given = replica_id if replica_id is not None else replica  # --replica N: the older spelling
    if given is not None and load_balancer:
        fail("give a REPLICA_ID or --load-balancer, not both", EXIT_USAGE)
    chosen: int | None = None
    if given is not None:
        chosen = int(given) if given.isdecimal() and int(given) >= 1 else None
        if chosen is None:
            fail(
                f"replica {given!r}: a replica's ID, a number from 1 (see: skyhop serve status {name})",
                EXIT_USAGE,
            )
    from skyhop.cli.serving import run_serve_logs

    run_command(run_serve_logs(name, chosen, load_balancer=load_balancer, follow=follow))


@serve_app.command("down")
def down(
    names: Annotated[
        list[str] | None, typer.Argument(help="Services to take down.", show_default=False)
    ] = None,
    all_services: Annotated[bool, typer.Option("--all", "-a", help="Every service.")] = False,
    yes: Yes = False,
) -> None:
    """Take services down: every replica's cluster and the load balancer removed, nothing left."""
    if bool(names) == all_services:
        fail("name the services to take down, or give --all", EXIT_USAGE)
    if not yes:
        what = "every service" if all_services else ", ".join(names or [])
        typer.confirm(f"Take down {what}?", default=True, abort=True, err=True)
    from skyhop.cli.serving import run_serve_down

    run_command(run_serve_down(names or [], all_services=all_services))
