"""``skyhop optimize``, ``skyhop show-gpus`` and ``skyhop catalog update``: the optimizer's commands.

Each imports what it needs when it runs, so ``skyhop --help`` stays fast.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from skyhop.cli.output import EXIT_USAGE, fail, info, print_json, table

__all__ = ["check_minimize", "register_catalog_commands"]

catalog_app = typer.Typer(
    help="The instance catalogs the optimizer chooses from.", no_args_is_help=True, rich_markup_mode=None
)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document.")]
MinimizeOpt = Annotated[str, typer.Option("--minimize", help="What to minimise: cost or time.")]


def check_minimize(value: str) -> Any:
    """``cost`` or ``time``, else a usage error."""
    if value not in ("cost", "time"):
        fail(f"--minimize must be 'cost' or 'time', got {value!r}", EXIT_USAGE)
    return value


def optimize(
    entrypoint: Annotated[str, typer.Argument(help="A task YAML (one task, or a chain separated by ---).")],
    as_json: JsonOpt = False,
    minimize: MinimizeOpt = "cost",
) -> None:
    """Show where a task (or a chain of tasks) would run and what it would cost (= launch --dryrun)."""
    from skyhop.cli.planning import dryrun
    from skyhop.spec import TaskOverrides

    raise typer.Exit(dryrun(entrypoint, TaskOverrides(), as_json=as_json, minimize=check_minimize(minimize)))


def show_gpus(
    accelerator: Annotated[
        str | None, typer.Argument(help="NAME or NAME:COUNT, e.g. A100 or H100:8.", show_default=False)
    ] = None,
    cloud: Annotated[str | None, typer.Option("--cloud", "--infra", help="Only this provider.")] = None,
    region: Annotated[str | None, typer.Option("--region", help="Only this region.")] = None,
    all_regions: Annotated[
        bool, typer.Option("--all", "-a", help="One row per region, not the cheapest.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """List accelerators: the counts a node can have, and where each is cheapest (on-demand and spot)."""
    from skyhop.optimizer.gpus import list_gpus, offering_gpus
    from skyhop.providers.catalog import CatalogError, load_catalogs
    from skyhop.providers.registry import canonical_name, get_provider
    from skyhop.spec import parse_accelerators

    name = count = None
    if accelerator:
        try:
            ((name, count),) = parse_accelerators(accelerator).items()
        except ValueError as exc:
            fail(str(exc), EXIT_USAGE)
        if ":" not in accelerator:
            count = None
    try:
        if cloud is not None and canonical_name(cloud) == "kubernetes":
            # No catalog: what the allowed contexts' nodes have free now, at price 0 (or configured).
            offered = get_provider("kubernetes").offerings()
            rows = offering_gpus(offered, name=name, count=count, region=region)
        else:
            rows = list_gpus(
                load_catalogs(), name=name, count=count, cloud=cloud, region=region, all_regions=all_regions
            )
    except CatalogError as exc:
        fail(str(exc))
    if as_json:
        print_json("gpus", [r.model_dump() for r in rows])
        return
    if not rows:
        fail(f"no accelerator matches {accelerator or 'the filters'}; run 'skyhop show-gpus' to list all")
    if name or all_regions or region:
        # One region per row: without --all/--region, the spot price has its own region column.
        spot_where = not (all_regions or region)
        headers = ["GPU", "QTY", "INFRA", "INSTANCE", "vCPUs", "HOST_MEM", "GPU_MEM", "REGION", "$/HOUR"]
        headers += ["SPOT_REGION", "SPOT $/HOUR"] if spot_where else ["SPOT $/HOUR"]
        table(
            headers,
            [
                [
                    r.accelerator,
                    f"{r.count:g}",
                    r.provider,
                    r.instance_type,
                    f"{r.cpus:g}",
                    f"{r.memory_gib:g}GB",
                    f"{r.accelerator_memory_gib:g}GB" if r.accelerator_memory_gib else "-",
                    r.region or "-",
                    _money(r.price),
                    *([r.spot_region or "-"] if spot_where else []),
                    _money(r.spot_price),
                ]
                for r in rows
            ],
        )
        return
    summary: dict[tuple[str, str], list[Any]] = {}
    for r in rows:
        entry = summary.setdefault((r.accelerator, r.provider), [[], None, None])
        entry[0].append(f"{r.count:g}")
        if r.price is not None and (entry[1] is None or r.price / r.count < entry[1]):
            entry[1] = r.price / r.count
        if r.spot_price is not None and (entry[2] is None or r.spot_price / r.count < entry[2]):
            entry[2] = r.spot_price / r.count
    table(
        ["GPU", "INFRA", "QTY PER NODE", "CHEAPEST $/GPU-HOUR", "SPOT $/GPU-HOUR"],
        [[acc, prov, ", ".join(e[0]), _money(e[1]), _money(e[2])] for (acc, prov), e in summary.items()],
    )
    info("Details and regions: skyhop show-gpus NAME[:COUNT] [--all]")


@catalog_app.command("update")
def update(
    cloud: Annotated[
        list[str] | None, typer.Option("--cloud", help="aws, gcp or azure (repeatable; default: all).")
    ] = None,
) -> None:
    """Regenerate catalogs from the clouds' public pricing APIs, for every worker (they then win)."""
    from skyhop.providers.catalog import CLOUDS
    from skyhop.providers.catalog.update import UpdateError, update_catalog
    from skyhop.storage.errors import StorageError

    for name in cloud or list(CLOUDS):
        if name not in CLOUDS:
            fail(f"--cloud must be one of {', '.join(CLOUDS)}, got {name!r}", EXIT_USAGE)
    for name in cloud or list(CLOUDS):
        info(f"Updating the {name} catalog from its pricing API...")
        try:
            path, rows = update_catalog(name)
        except UpdateError as exc:
            fail(str(exc))
        except StorageError as exc:
            fail(f"cannot share the {name} catalog with the workers: {exc}")
        info(f"Wrote {rows} rows to {path} and the content store")


def _money(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def register_catalog_commands(app: typer.Typer) -> None:
    """Add this module's commands to the ``skyhop`` app."""
    app.command("optimize")(optimize)
    app.command("show-gpus")(show_gpus)
    app.add_typer(catalog_app, name="catalog")
