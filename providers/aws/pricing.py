"""AWS prices for ``skyhop catalog update``: the Price List API (on-demand) and EC2 spot history.

The Price List API (boto3 ``pricing``, served from us-east-1) lists Linux, shared-tenancy,
on-demand prices with each type's vCPUs and memory, so CPU types it reports are added even if the
catalog did not know them. GPU types keep their accelerators from the current catalog, which
names them (the Price List gives only a GPU count). Spot prices are per zone, from each region's
``DescribeSpotPriceHistory``; where a region reports none, the row is region-wide and on-demand only.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from skyhop.providers.catalog import Catalog
from skyhop.providers.catalog.update import Row, UpdateError, shape_of
from skyhop.providers.extras import ExtraMissingError, require_extra

__all__ = ["fetch_rows"]

_FILTERS = [
    {"Type": "TERM_MATCH", "Field": "operatingSystem", "Value": "Linux"},
    {"Type": "TERM_MATCH", "Field": "tenancy", "Value": "Shared"},
    {"Type": "TERM_MATCH", "Field": "preInstalledSw", "Value": "NA"},
    {"Type": "TERM_MATCH", "Field": "capacitystatus", "Value": "Used"},
    {"Type": "TERM_MATCH", "Field": "licenseModel", "Value": "No License required"},
]


def _on_demand(pricing: Any) -> dict[tuple[str, str], tuple[float, float, float]]:
    """(instance type, region) -> (vCPUs, GiB, $/h) from the Price List."""
    prices: dict[tuple[str, str], tuple[float, float, float]] = {}
    for page in pricing.get_paginator("get_products").paginate(ServiceCode="AmazonEC2", Filters=_FILTERS):
        for text in page["PriceList"]:
            item = json.loads(text)
            attributes = item["product"]["attributes"]
            for term in item.get("terms", {}).get("OnDemand", {}).values():
                for dimension in term["priceDimensions"].values():
                    usd = float(dimension["pricePerUnit"].get("USD", 0) or 0)
                    if usd > 0:
                        memory = float(attributes.get("memory", "0 GiB").split()[0].replace(",", ""))
                        key = (attributes["instanceType"], attributes["regionCode"])
                        prices[key] = (float(attributes.get("vcpu", 0)), memory, usd)
    return prices


def _spot(ec2: Any, types: list[str]) -> dict[tuple[str, str], float]:
    """(instance type, zone) -> latest spot $/h in one region."""
    latest: dict[tuple[str, str], tuple[datetime, float]] = {}
    pages = ec2.get_paginator("describe_spot_price_history").paginate(
        InstanceTypes=types, ProductDescriptions=["Linux/UNIX"], StartTime=datetime.now(UTC)
    )
    for page in pages:
        for entry in page["SpotPriceHistory"]:
            key = (entry["InstanceType"], entry["AvailabilityZone"])
            stamp = entry["Timestamp"]
            if key not in latest or stamp > latest[key][0]:
                latest[key] = (stamp, float(entry["SpotPrice"]))
    return {key: price for key, (_, price) in latest.items()}


def fetch_rows(shapes: Catalog, session: Any = None) -> list[Row]:
    """Catalog rows for every type the Price List prices in a region (``session``: a boto3 Session)."""
    try:
        require_extra("aws", "AWS pricing")
    except ExtraMissingError as exc:
        raise UpdateError(str(exc)) from None
    import boto3
    import botocore.exceptions

    session = session or boto3.session.Session()
    try:
        on_demand = _on_demand(session.client("pricing", region_name="us-east-1"))
        regions = sorted({region for _, region in on_demand})
        spot: dict[tuple[str, str], float] = {}
        for region in regions:
            types = sorted({t for t, r in on_demand if r == region})
            spot.update(_spot(session.client("ec2", region_name=region), types))
    except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as exc:
        raise UpdateError(f"AWS pricing: {exc}") from None
    zones: dict[tuple[str, str], list[tuple[str, float]]] = {}
    for (itype, zone), price in spot.items():
        zones.setdefault((itype, zone.rstrip("abcdefghijklmnopqrstuvwxyz")), []).append((zone, price))
    rows: list[Row] = []
    for (itype, region), (cpus, memory, price) in on_demand.items():
        if itype in shapes.types:
            cpus, memory, accelerator, count, accelerator_memory = shape_of(shapes, itype)
        elif "." in itype and not itype.startswith(("p", "g", "trn", "inf", "dl", "f1", "vt")):
            accelerator, count, accelerator_memory = "", None, None
        else:
            continue  # an accelerator type skyhop cannot name yet
        head: tuple[str, float, float, str, float | None, float | None] = (
            itype,
            cpus,
            memory,
            accelerator,
            count,
            accelerator_memory,
        )
        in_zones = sorted(zones.get((itype, region), []))
        if not in_zones:
            rows.append((*head, region, "", price, None))
        rows += [(*head, region, zone, price, spot_price) for zone, spot_price in in_zones]
    return rows
