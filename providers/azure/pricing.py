"""Azure prices for ``skyhop catalog update``: the Retail Prices API (public, no credentials).

Each Linux VM size has a pay-as-you-go item per region and a "Spot" one; Windows and
"Low Priority" items are skipped. The sizes' vCPUs, memory and GPUs come from the catalog in
effect (the API has none of them). ``SKYHOP_AZURE_PRICES_URL`` points elsewhere (tests).
"""

from __future__ import annotations

import os
import urllib.parse
from typing import Any

from skyhop.providers.catalog import Catalog
from skyhop.providers.catalog.update import Row, UpdateError, get_json, shape_of

__all__ = ["fetch_rows"]

_URL = "https://prices.azure.com/api/retail/prices"
_FILTER = "serviceName eq 'Virtual Machines' and priceType eq 'Consumption'"


def _items(base: str) -> list[dict[str, Any]]:
    query = urllib.parse.urlencode({"api-version": "2023-01-01-preview", "$filter": _FILTER})
    url: str | None = f"{base}?{query}"
    items: list[dict[str, Any]] = []
    while url:
        page = get_json(url)
        if not isinstance(page, dict):
            raise UpdateError("Azure retail prices: unexpected response")
        items += page.get("Items", [])
        url = page.get("NextPageLink")
    return items


def fetch_rows(shapes: Catalog) -> list[Row]:
    """Catalog rows for the known VM sizes in every region the API prices them."""
    prices: dict[tuple[str, str], dict[bool, float]] = {}
    for item in _items(os.environ.get("SKYHOP_AZURE_PRICES_URL", _URL)):
        sku, product = item.get("skuName", ""), item.get("productName", "")
        if "Windows" in product or "Low Priority" in sku or item.get("unitOfMeasure") != "1 Hour":
            continue
        name, region = item.get("armSkuName", ""), item.get("armRegionName", "")
        if name in shapes.types and region and item.get("retailPrice", 0) > 0:
            prices.setdefault((name, region), {})[sku.endswith(" Spot")] = float(item["retailPrice"])
    return [
        (name, *shape_of(shapes, name), region, "", market.get(False), market.get(True))
        for (name, region), market in sorted(prices.items())
    ]
