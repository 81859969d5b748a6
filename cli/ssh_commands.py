"""``skyhop ssh up|status|down``: pools of SSH hosts the user owns (SkyPilot's ssh_node_pools.yaml),
kept in the deployment's ``SSHPoolsWorkflow``.

Each command imports the SSH provider (and asyncssh) only when it runs.
"""

from __future__ import annotations

from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from skyhop.cli.output import EXIT_USAGE, fail, info, print_json, table
from skyhop.cli.running import run_command

if TYPE_CHECKING:
    from skyhop.providers.ssh.admin import HostStatus
    from skyhop.providers.ssh.pools import HostSpec

__all__ = ["ssh_app"]

T = TypeVar("T")

ssh_app = typer.Typer(
    help="Pools of SSH hosts you own: launch on them with --infra ssh/<pool>.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@ssh_app.command("up")
def up(
    pools_file: Annotated[
        Path | None,
        typer.Argument(help="Pools YAML (SkyPilot's ssh_node_pools.yaml layout).", show_default=False),
    ] = None,
) -> None:
    """Register the pools in POOLS_FILE (default ~/.skyhop/ssh_node_pools.yaml) and probe every host.

    Each host's CPUs, memory and GPUs (nvidia-smi) become its pool's offerings; its host key is
    pinned. The pools, with the identity files they name, are kept in Temporal (encrypted), where
    every worker finds them. Exits 1 if a host did not answer (the others are registered).
    """
    from skyhop.providers.ssh.pools import PoolsError, default_pools_file, load_pools

    path = pools_file or default_pools_file()
    try:
        pools = load_pools(path)
    except PoolsError as exc:
        fail(str(exc), EXIT_USAGE)
    run_command(_closing(_up(pools)))


async def _up(pools: dict[str, list[HostSpec]]) -> int:
    from skyhop.providers.ssh.admin import register_pools
    from skyhop.providers.ssh.pools import PoolsError

    try:
        hosts = await register_pools(pools)
    except PoolsError as exc:
        fail(str(exc), EXIT_USAGE)
    failed = [host for host in hosts if host.facts is None]
    for name, specs in pools.items():
        answered = sum(1 for h in hosts if h.spec.pool == name and h.facts is not None)
        info(f"Pool {name}: {answered} of {len(specs)} host(s) ready.")
    _print_rows(await _rows(live=False))
    if failed:
        fail(f"{len(failed)} of {len(hosts)} host(s) did not answer; fix them and run 'skyhop ssh up' again")
    return 0


@ssh_app.command("status")
def status(json_output: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """Hosts per pool: reachable now or not, CPUs, memory, GPUs, and the cluster holding each."""
    run_command(_closing(_status(json_output)))


async def _status(json_output: bool) -> int:
    rows = await _rows(live=True)
    if json_output:
        print_json("hosts", [row.model_dump() for row in rows])
    elif not rows:
        info("No SSH pools. Register some with: skyhop ssh up pools.yaml")
    else:
        _print_rows(rows)
    return 0


@ssh_app.command("down")
def down(pools: Annotated[list[str], typer.Argument(help="Pools to forget.", show_default=False)]) -> None:
    """Forget pools (refused while a cluster holds one of their hosts; take it down first)."""
    run_command(_down(pools))


async def _down(pools: list[str]) -> int:
    from skyhop.providers.ssh.admin import remove_pools
    from skyhop.providers.ssh.pools import PoolsError

    try:
        await remove_pools(pools)
    except PoolsError as exc:
        fail(str(exc))
    for name in pools:
        info(f"Pool {name} removed.")
    return 0


async def _rows(live: bool) -> list[HostStatus]:
    from skyhop.providers.ssh.admin import pool_status

    return await pool_status(live=live)


async def _closing(work: Coroutine[Any, Any, T]) -> T:
    """Await ``work``, then close its SSH connections before the event loop ends."""
    from skyhop.providers.ssh.connection import close_connections

    try:
        return await work
    finally:
        await close_connections()


def _print_rows(rows: list[HostStatus]) -> None:
    lines = []
    for row in rows:
        gpus = ", ".join(f"{name}:{count:g}" for name, count in row.accelerators.items()) or "-"
        held = f"{row.cluster} (rank {row.rank})" if row.cluster else "-"
        lines.append([
            row.pool, row.host, row.user, "reachable" if row.reachable else "UNREACHABLE",
            str(row.cpus) if row.cpus is not None else "-",
            f"{row.memory_gib:g} GB" if row.memory_gib is not None else "-", gpus, held,
        ])  # fmt: skip
    table(["POOL", "HOST", "USER", "STATUS", "CPUS", "MEMORY", "GPUS", "CLUSTER"], lines)
    for row in rows:
        if row.error:
            info(f"  {row.host}: {row.error}")
