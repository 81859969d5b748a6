"""``skyhop queue``, ``cancel``, ``stop``, ``start`` and ``autostop``: a cluster's jobs and lifecycle.

Each command is one query or update of the cluster's entity workflow; the workflow serializes
them with launches and with each other, so two people stopping and starting one cluster at the
same time get one consistent outcome.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, Any

import typer

from skyhop.cli.failures import is_not_found, is_stuck, while_busy
from skyhop.cli.output import EXIT_USAGE, age, duration, fail, info, print_json, table
from skyhop.cli.running import run_command

if TYPE_CHECKING:
    from temporalio.client import Client

    from skyhop.contract.clusters import (
        AutostopRequest,
        CancelRequest,
        ClusterRecord,
        JobRecord,
        StartRequest,
    )

__all__ = ["register_queue_commands"]

Clusters = Annotated[list[str] | None, typer.Argument(help="Cluster names.", show_default=False)]
AllClusters = Annotated[bool, typer.Option("--all", "-a", help="Every cluster.")]
Yes = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]
IdleMinutes = Annotated[
    int | None, typer.Option("--idle-minutes", "-i", help="Autostop after this many idle minutes.", min=0)
]
DownOpt = Annotated[
    bool, typer.Option("--down", help="Autostop tears the cluster down instead of stopping it.")
]


def queue(
    clusters: Clusters = None,
    all_users: Annotated[bool, typer.Option("--all-users", "-a", help="Jobs of every user.")] = False,
    skip_finished: Annotated[bool, typer.Option("--skip-finished", "-s", help="Only active jobs.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Show the job queue of clusters (default: every cluster), current user's jobs unless -a.

    Jobs start in submission order once their CPUs and GPUs are free.
    A job that does not fit yet holds back the jobs behind it (FIFO with
    head-of-line blocking, as in SkyPilot): big jobs are never starved.
    """
    run_command(run_queue(clusters or [], all_users=all_users, skip_finished=skip_finished, as_json=as_json))


def cancel(
    cluster: Annotated[str, typer.Argument(help="Cluster name.")],
    job_ids: Annotated[list[int] | None, typer.Argument(help="Job ids.", show_default=False)] = None,
    all_jobs: Annotated[bool, typer.Option("--all", "-a", help="Every queued and running job.")] = False,
    yes: Yes = False,
) -> None:
    """Cancel jobs: queued ones are dropped, running ones stopped on every node they run on."""
    if not job_ids and not all_jobs:
        fail("name the jobs to cancel, or pass --all", EXIT_USAGE)
    if job_ids and all_jobs:
        fail("give job ids or --all, not both", EXIT_USAGE)
    if not yes and all_jobs:
        typer.confirm(f"Cancel every job on cluster {cluster}?", default=True, abort=True, err=True)
    from skyhop.contract.clusters import CancelRequest

    run_command(run_cancel(cluster, CancelRequest(job_ids=job_ids or [], all=all_jobs)))


def stop(clusters: Clusters = None, all_clusters: AllClusters = False, yes: Yes = False) -> None:
    """Stop clusters: nodes stop, disks are kept; their jobs are cancelled. Start them again with start."""
    names = _names(clusters, all_clusters)
    if not yes:
        what = "every cluster" if all_clusters else ", ".join(names)
        typer.confirm(
            f"Stop {what}? Their running jobs will be cancelled.", default=True, abort=True, err=True
        )
    run_command(run_lifecycle(names, all_clusters, _stop, "stopped"))


def start(
    clusters: Clusters = None,
    all_clusters: AllClusters = False,
    idle_minutes: IdleMinutes = None,
    down: DownOpt = False,
    yes: Yes = False,
) -> None:
    """Start stopped clusters (where a provider cannot stop: new nodes in the same zone, set up again).

    Autostop is off afterwards unless -i is given.
    """
    names = _names(clusters, all_clusters)
    if down and idle_minutes is None:
        fail("--down needs --idle-minutes/-i", EXIT_USAGE)
    if not yes:
        what = "every stopped cluster" if all_clusters else ", ".join(names)
        typer.confirm(f"Start {what}?", default=True, abort=True, err=True)
    from skyhop.contract.clusters import StartRequest

    request = StartRequest(idle_minutes=idle_minutes, down=down)
    run_command(run_lifecycle(names, all_clusters, lambda handle: _start(handle, request), "started"))


def autostop(
    clusters: Clusters = None,
    all_clusters: AllClusters = False,
    idle_minutes: IdleMinutes = None,
    down: DownOpt = False,
    cancel_autostop: Annotated[bool, typer.Option("--cancel", help="Cancel autostop.")] = False,
) -> None:
    """Stop (or with --down, tear down) clusters once no job has run for -i minutes (default 5)."""
    names = _names(clusters, all_clusters)
    if cancel_autostop and (idle_minutes is not None or down):
        fail("--cancel takes no --idle-minutes or --down", EXIT_USAGE)
    from skyhop.contract.clusters import AutostopRequest

    request = AutostopRequest(
        idle_minutes=None if cancel_autostop else (5 if idle_minutes is None else idle_minutes), down=down
    )
    done = "autostop cancelled" if cancel_autostop else f"autostop set to {request.idle_minutes} idle minutes"
    if request.down:
        done += " (then down)"
    run_command(run_lifecycle(names, all_clusters, lambda handle: _autostop(handle, request), done))


def register_queue_commands(app: typer.Typer) -> None:
    """Add the commands to the ``skyhop`` app."""
    for command in (queue, cancel, stop, start, autostop):
        app.command()(command)


def _names(clusters: list[str] | None, all_clusters: bool) -> list[str]:
    if not clusters and not all_clusters:
        fail("name a cluster, or pass --all", EXIT_USAGE)
    if clusters and all_clusters:
        fail("give cluster names or --all, not both", EXIT_USAGE)
    return clusters or []


# --- what the commands do --------------------------------------------------------------------


async def run_queue(names: list[str], *, all_users: bool, skip_finished: bool, as_json: bool) -> int:
    """Print each cluster's jobs, newest first; a broken cluster is one line and makes the exit code 1."""
    from skyhop.cli.clusters import BrokenCluster, inspect_cluster, survey_clusters
    from skyhop.cli.session import current_user, open_client

    client = await open_client()
    if names:
        found = await asyncio.gather(*(inspect_cluster(client, name) for name in names))
        missing = [name for name, r in zip(names, found, strict=True) if r is None]
        if missing:
            fail(f"cluster(s) {', '.join(missing)} not found; see: skyhop status")
        records = [r for r in found if r is not None and not isinstance(r, BrokenCluster)]
        broken = [r for r in found if isinstance(r, BrokenCluster)]
    else:
        records, broken = await survey_clusters(client)
    if broken and not records:
        fail("; ".join(b.hint for b in broken))
    user = current_user()

    def shown(job: JobRecord) -> bool:
        return (all_users or job.user == user) and not (skip_finished and job.status.done)

    listing = {record.name: [job for job in reversed(record.jobs) if shown(job)] for record in records}
    if as_json:
        print_json(
            "jobs",
            [
                {"cluster": name, **job.model_dump(mode="json")}
                for name, jobs in listing.items()
                for job in jobs
            ],
        )
        return 1 if broken else 0
    if not records:
        info("No clusters.")
    headers = ["ID", "NAME", "USER", "SUBMITTED", "STARTED", "DURATION", "RESOURCES", "STATUS"]
    now = time.time()
    for index, (name, jobs) in enumerate(listing.items()):
        if index:
            print()
        who = "all users" if all_users else f"user {user}"
        print(f"Job queue of {who} on cluster {name}")
        table(headers, [_job_row(job, now) for job in jobs])
    if broken:
        fail("; ".join(b.hint for b in broken))
    return 0


def _job_row(job: JobRecord, now: float) -> list[str]:
    ran = None
    if job.started_at is not None:
        ran = (job.ended_at or now) - job.started_at
    return [
        str(job.job_id),
        job.name or "-",
        job.user,
        age(job.submitted_at),
        age(job.started_at),
        duration(ran),
        _resources(job),
        job.status.value,
    ]


def _resources(job: JobRecord) -> str:
    """``1x[CPU:0.5]`` or ``2x[CPU:4, A100:1]``, as SkyPilot shows a job's demand."""
    if job.demand is None:
        return f"{job.num_nodes}x[{job.resources}]"
    parts = [f"CPU:{job.demand.cpus:g}"] + [f"{n}:{c:g}" for n, c in job.demand.gpus.items()]
    return f"{job.num_nodes}x[{', '.join(parts)}]"


async def run_cancel(cluster: str, request: CancelRequest) -> int:
    """Cancel the jobs and say what happened to each."""
    from skyhop.cli.session import open_client
    from skyhop.contract import ClusterUpdate
    from skyhop.contract.clusters import CancelResult

    client = await open_client()
    result: CancelResult = await _update(client, cluster, ClusterUpdate.CANCEL, request, CancelResult)
    if result.cancelled:
        info(f"Cancelled job(s) {_ids(result.cancelled)} on cluster {cluster}.")
    elif request.all:
        info(f"No queued or running jobs on cluster {cluster}.")
    if result.already_done:
        info(f"Job(s) {_ids(result.already_done)} had already ended.")
    if result.unknown:
        fail(f"cluster {cluster!r} has no job(s) {_ids(result.unknown)}; see: skyhop queue {cluster}")
    return 0


async def run_lifecycle(
    names: list[str],
    all_clusters: bool,
    operation: Callable[[Any], Awaitable[ClusterRecord]],
    done: str,
    client: Client | None = None,
    *,
    broken_too: bool = False,
) -> int:
    """Apply ``operation`` to each cluster's workflow at once; one line per cluster.

    With ``--all``, broken clusters are included only when ``broken_too`` (``down`` can remove them).
    """
    from skyhop.cli.clusters import survey_clusters
    from skyhop.cli.session import open_client
    from skyhop.contract import cluster_workflow_id

    client = client or await open_client()
    if all_clusters:
        records, broken = await survey_clusters(client)
        names = [record.name for record in records] + ([b.name for b in broken] if broken_too else [])
        if not names:
            info("No clusters.")
            return 0

    async def one(name: str) -> str | None:
        try:
            record = await operation(client.get_workflow_handle(cluster_workflow_id(name)))
        except _Refused as exc:
            return f"cluster {name!r}: {exc}"
        info(f"Cluster {name} {done} (status {record.status.value}).")
        return None

    errors = [e for e in await asyncio.gather(*(one(n) for n in names)) if e]
    if errors:
        fail("; ".join(errors))
    return 0


class _Refused(Exception):
    """The cluster does not exist, or its workflow refused the update (the reason is the message)."""


class _Stuck(_Refused):
    """The cluster's workflow is stuck (its task fails): it takes no update until a worker can run it."""


async def _stop(handle: Any) -> ClusterRecord:
    from skyhop.contract import ClusterUpdate

    record: ClusterRecord = await _call(handle, ClusterUpdate.STOP, None)
    return record


async def _start(handle: Any, request: StartRequest) -> ClusterRecord:
    from skyhop.contract import ClusterUpdate

    record: ClusterRecord = await _call(handle, ClusterUpdate.START, request)
    return record


async def run_down(names: list[str], all_clusters: bool) -> int:
    """Tear down clusters through their entity workflows; a broken one's nodes are found by tag instead."""
    from skyhop.cli.clusters import remove_broken
    from skyhop.cli.launching import say_launch_holding
    from skyhop.cli.session import open_client
    from skyhop.contract import ClusterStatus, ClusterUpdate
    from skyhop.contract.clusters import ClusterRecord

    client = await open_client()

    async def down(handle: Any) -> ClusterRecord:
        await say_launch_holding(client, handle.id)
        try:
            record: ClusterRecord = await _call(handle, ClusterUpdate.DOWN, None)
        except _Stuck:
            await remove_broken(handle)
            record = ClusterRecord(name=handle.id.removeprefix("cluster:"), status=ClusterStatus.TERMINATED)
        return record

    return await run_lifecycle(names, all_clusters, down, "terminated", client, broken_too=True)


async def _autostop(handle: Any, request: AutostopRequest) -> ClusterRecord:
    from skyhop.contract import ClusterUpdate

    record: ClusterRecord = await _call(handle, ClusterUpdate.SET_AUTOSTOP, request)
    return record


async def _update(client: Client, cluster: str, name: str, arg: Any, result_type: type[Any]) -> Any:
    from skyhop.contract import cluster_workflow_id

    try:
        return await _call(client.get_workflow_handle(cluster_workflow_id(cluster)), name, arg, result_type)
    except _Refused as exc:
        fail(f"cluster {cluster!r}: {exc}")


async def _call(handle: Any, name: str, arg: Any, result_type: type[Any] | None = None) -> Any:
    """Execute update ``name``; a missing cluster or a refusal becomes ``_Refused`` with its reason."""
    from temporalio.client import WorkflowUpdateFailedError
    from temporalio.service import RPCError

    from skyhop.contract.clusters import ClusterRecord
    from skyhop.contract.failures import innermost_message

    result_type = result_type or ClusterRecord
    try:
        args = [] if arg is None else [arg]
        return await while_busy(lambda: handle.execute_update(name, *args, result_type=result_type))
    except WorkflowUpdateFailedError as exc:
        raise _Refused(innermost_message(exc)) from None
    except RPCError as exc:
        if is_not_found(exc):
            raise _Refused("not found; see: skyhop status") from None
        if is_stuck(exc):
            name = handle.id.removeprefix("cluster:")
            raise _Stuck(f"its workflow is {_BROKEN_WORDS}; remove it with: skyhop down {name}") from None
        raise


_BROKEN_WORDS = "stuck (BROKEN in skyhop status)"


def _ids(ids: list[int]) -> str:
    return ", ".join(str(i) for i in ids)
