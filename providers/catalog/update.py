"""``skyhop catalog update``: regenerate a cloud's catalog from its public pricing API.

The pricing APIs give prices per region (AWS spot: per zone); what sizes the machine types have
and which zones offer them comes from the catalog in effect (AWS also reports sizes itself). The
result is the deployment's catalog for that cloud (in the content store, so every worker uses it,
and in ``~/.skyhop/catalogs/<cloud>/catalog.csv``: ``sources.py``); it overrides the shipped one.
Each cloud's client lives beside its provider: ``providers/<cloud>/pricing.py``.
"""

from __future__ import annotations

import csv
import importlib
import os
from pathlib import Path

from skyhop.providers.catalog.errors import CatalogError
from skyhop.providers.catalog.model import Catalog
from skyhop.providers.catalog.skyhop_csv import COLUMNS
from skyhop.providers.catalog.sources import catalog_state, load_catalogs, user_catalog_path

__all__ = ["Row", "UpdateError", "get_json", "shape_of", "update_catalog", "write_catalog"]

Row = tuple[
    str, float | None, float | None, str, float | None, float | None, str, str, float | None, float | None
]
"""One catalog line, in ``skyhop_csv.COLUMNS`` order (empty strings / None for blanks)."""


class UpdateError(Exception):
    """A pricing API could not be read or returned nothing usable; the message says which and why."""


def update_catalog(cloud: str) -> tuple[Path, int]:
    """Fetch ``cloud``'s prices and write its catalog; returns the file and the number of rows."""
    try:
        shapes = load_catalogs().get(cloud)
    except (CatalogError, KeyError) as exc:
        raise UpdateError(f"cannot read the current {cloud} catalog for machine sizes: {exc}") from None
    module = importlib.import_module(f"skyhop.providers.{cloud}.pricing")
    rows: list[Row] = module.fetch_rows(shapes)
    if not rows:
        raise UpdateError(f"the {cloud} pricing API returned no price for any known instance type")
    from skyhop.storage.shared_state import publish

    path = user_catalog_path(cloud)
    write_catalog(path, rows)
    publish(catalog_state(cloud), path.read_bytes(), path)
    return path, len(rows)


def write_catalog(path: Path, rows: list[Row]) -> None:
    """Write rows in skyhop's layout, replacing ``path`` atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    with partial.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(COLUMNS)
        for row in sorted(rows, key=lambda r: (r[0], r[3], r[4], r[6], r[7])):
            writer.writerow(["" if v is None else f"{v:g}" if isinstance(v, float) else v for v in row])
    partial.replace(path)


def shape_of(shapes: Catalog, name: str) -> tuple[float, float, str, float | None, float | None]:
    """(vCPUs, GiB, accelerator, count, accelerator GiB) of a known instance type, for a Row."""
    t = shapes.types[name]
    if not t.accelerator:
        return t.cpus, t.memory_gib, "", None, None
    return t.cpus, t.memory_gib, t.accelerator, t.accelerator_count, t.accelerator_memory_gib


def get_json(url: str, timeout: float = 60.0) -> object:
    """GET a JSON document (the public pricing APIs need no credentials beyond the URL)."""
    import json
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return json.loads(response.read())
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise UpdateError(f"cannot read {url.split('?')[0]}: {exc}") from None
