"""skyhop's own catalog layout: one row per instance type and location, prices all-inclusive.

Columns: ``instance_type, vcpus, memory_gib, accelerator, accelerator_count,
accelerator_memory_gib, region, zone, price, spot_price``. ``zone`` is empty where a cloud prices
per region; an empty ``instance_type`` makes the row an accelerator billed separately and attached
to a host VM (GCP's N1 GPUs), priced per zone for ``accelerator_count`` of them.
"""

from __future__ import annotations

from pathlib import Path

from skyhop.providers.catalog.model import Catalog, InstanceType
from skyhop.providers.catalog.rows import CsvRows

__all__ = ["COLUMNS", "read_skyhop_csv"]

COLUMNS = (
    "instance_type",
    "vcpus",
    "memory_gib",
    "accelerator",
    "accelerator_count",
    "accelerator_memory_gib",
    "region",
    "zone",
    "price",
    "spot_price",
)


def read_skyhop_csv(provider: str, path: Path) -> Catalog:
    """Parse one provider's catalog file; a bad row raises CatalogError naming its line."""
    catalog = Catalog(provider=provider, source=str(path))
    rows = CsvRows(path, COLUMNS, "skyhop's catalog columns " + ",".join(COLUMNS))
    for row in rows:
        region = row["region"].strip()
        if not region:
            raise rows.error("column region is empty")
        location = (
            region,
            row["zone"].strip() or None,
            rows.number(row, "price"),
            rows.number(row, "spot_price"),
        )
        if location[2] is None and location[3] is None:
            raise rows.error("row has neither price nor spot_price")
        accelerator = row["accelerator"].strip() or None
        count = rows.number(row, "accelerator_count") or 0.0
        if accelerator and count <= 0:
            raise rows.error(f"accelerator {accelerator} needs a positive accelerator_count")
        memory = rows.number(row, "accelerator_memory_gib")
        name = row["instance_type"].strip()
        if not name:
            if not accelerator:
                raise rows.error("row has neither instance_type nor accelerator")
            catalog.add_attachable(accelerator, count, memory, location)
            continue
        itype = InstanceType(
            name=name,
            cpus=rows.number(row, "vcpus", required=True) or 0.0,
            memory_gib=rows.number(row, "memory_gib", required=True) or 0.0,
            accelerator=accelerator,
            accelerator_count=count,
            accelerator_memory_gib=memory,
        )
        known = catalog.types.get(name)
        if known is not None and (known.cpus, known.memory_gib) != (itype.cpus, itype.memory_gib):
            raise rows.error(f"{name} has a different size than on an earlier line")
        catalog.add(itype, location)
    return catalog
