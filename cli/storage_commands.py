"""``skyhop storage ls|delete``: the buckets skyhop created for ``file_mounts`` storage entries.

Run here, with this machine's cloud credentials (as ``skyhop check`` does): listing and deleting a
bucket needs no cluster and no worker. Only buckets whose labels say skyhop created them are
listed or deleted; a user's own bucket that a task merely used is never touched.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated

import typer

from skyhop.cli.options import JsonOpt, Yes
from skyhop.cli.output import fail, info, print_json, table

if TYPE_CHECKING:
    from skyhop.storage import BucketRecord, BucketStore

__all__ = ["storage_app"]

storage_app = typer.Typer(
    help="Buckets skyhop created for file_mounts storage entries.",
    no_args_is_help=True,
    rich_markup_mode=None,
)

StoreOpt = Annotated[
    str | None,
    typer.Option("--store", help="Only this store: s3, gcs, azure, r2 or minio.", show_default=False),
]


def _stores(only: str | None) -> list[BucketStore]:
    """The stores usable here (SDK installed, configured), or just ``only``."""
    from skyhop.spec.storage import StoreKind
    from skyhop.storage import StorageError, get_store

    if only is not None and only.lower() not in [kind.value for kind in StoreKind]:
        fail(f"--store {only!r} is not a store; use one of: {', '.join(k.value for k in StoreKind)}", 2)
    kinds = [StoreKind(only.lower())] if only is not None else list(StoreKind)
    stores = []
    for kind in kinds:
        try:
            stores.append(get_store(kind))
        except StorageError as exc:
            if only is not None:
                fail(str(exc))
    return stores


def _created(store: BucketStore) -> list[BucketRecord]:
    from skyhop.storage import CREATED_LABEL, StorageError

    try:
        return store.list({CREATED_LABEL: "true"})
    except StorageError as exc:
        info(f"{store.kind.value}: {exc}")
        return []


@storage_app.command("ls")
def ls(json_output: JsonOpt = False, store: StoreOpt = None) -> None:
    """List the buckets skyhop created, in every store this machine can reach."""
    records = [record for each in _stores(store) for record in _created(each)]
    if json_output:
        items = [
            {
                "name": r.name,
                "store": r.store.value,
                "created_at": r.created_at.timestamp() if r.created_at else None,
                "cluster": r.cluster,
                "persistent": r.persistent,
            }
            for r in records
        ]
        print_json("buckets", items)
        return
    rows = [
        [r.name, r.store.value, _when(r.created_at), r.cluster or "-", "yes" if r.persistent else "no"]
        for r in records
    ]
    table(["NAME", "STORE", "CREATED", "CLUSTER", "PERSISTENT"], rows)


def _when(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M") if moment else "-"


@storage_app.command("delete")
def delete(
    names: Annotated[list[str], typer.Argument(help="Buckets to delete (with everything in them).")],
    store: StoreOpt = None,
    yes: Yes = False,
) -> None:
    """Delete buckets skyhop created; a missing or foreign bucket is named and left alone (exit 1)."""
    from skyhop.storage import CREATED_LABEL, StorageError

    stores = _stores(store)
    if not yes:
        typer.confirm(
            f"Delete {', '.join(names)} and everything in them?", default=False, abort=True, err=True
        )
    failed = False
    for name in dict.fromkeys(names):
        found, unreachable = [], False
        for each in stores:
            try:
                labels = each.labels(name)
            except StorageError as exc:
                info(f"{name}: {exc}")
                unreachable = failed = True
                continue
            if labels is not None:
                found.append((each, labels))
        if not found:
            if not unreachable:
                info(f"{name}: no such bucket (nothing deleted)")
            failed = True
            continue
        for each, labels in found:
            if labels.get(CREATED_LABEL) != "true":
                info(
                    f"{name}: a {each.kind.value} bucket skyhop did not create; "
                    "delete it with your cloud's tools"
                )
                failed = True
                continue
            try:
                each.delete(name)
            except StorageError as exc:
                info(f"{name}: {exc}")
                failed = True
                continue
            info(f"Deleted {each.kind.value}://{name}")
    raise typer.Exit(1 if failed else 0)
