"""GCP prices for ``skyhop catalog update``: the Cloud Billing Catalog API (public, with an API key).

Compute Engine bills a machine as vCPUs x a per-core rate plus GiB x a per-GiB rate of its
family ("N2 Instance Core running in Americas"), and GPUs per GPU-hour ("Nvidia Tesla T4 GPU"),
with separate SKUs for spot ("Spot Preemptible ..."). The machine types, their sizes and zones
come from the catalog in effect; their prices are recomputed per region from the SKUs. TPU VMs
are billed by the Cloud TPU service, whose SKUs this client does not read yet: their rows are kept
as the catalog in effect has them, so an update never loses them.

The API key is read from ``GOOGLE_API_KEY``; ``SKYHOP_GCP_BILLING_URL`` points elsewhere (tests).
"""

from __future__ import annotations

import os
import re
import urllib.parse
from typing import Any

from skyhop.providers.catalog import Catalog
from skyhop.providers.catalog.tpus import is_tpu
from skyhop.providers.catalog.update import Row, UpdateError, get_json, shape_of

__all__ = ["fetch_rows"]

_URL = "https://cloudbilling.googleapis.com/v1/services/6F81-5844-456A/skus"
"""Compute Engine's SKUs."""
_MACHINE = re.compile(
    r"^(?P<spot>Spot Preemptible |Preemptible )?(?P<family>[A-Z]\d[A-Z]?)(?: Predefined)? "
    r"Instance (?P<kind>Core|Ram)\b"
)
_GPU = re.compile(
    r"^(?P<spot>Spot Preemptible |Preemptible )?Nvidia (?:Tesla )?(?P<name>[A-Z]\d+[A-Z]?(?: 80GB)?) GPU\b"
)
_GPU_NAMES = {"A100 80GB": "A100-80GB", "H100 80GB": "H100"}

Rates = dict[tuple[str, str, bool], float]
"""(family or GPU, region, spot) -> $ per core-hour, GiB-hour or GPU-hour."""


def _unit_price(sku: dict[str, Any]) -> float | None:
    for info in sku.get("pricingInfo", [])[:1]:
        rates = info["pricingExpression"]["tieredRates"]
        money = rates[-1]["unitPrice"]
        return float(int(money.get("units", 0) or 0) + money.get("nanos", 0) / 1e9)
    return None


def _rates(skus: list[dict[str, Any]]) -> tuple[Rates, Rates, Rates]:
    """Per-core, per-GiB and per-GPU rates by region and market."""
    cores: Rates = {}
    ram: Rates = {}
    gpus: Rates = {}
    for sku in skus:
        category = sku.get("category", {})
        if category.get("usageType") not in ("OnDemand", "Preemptible"):
            continue
        description = sku.get("description", "")
        price = _unit_price(sku)
        if price is None or "Custom" in description or "Sole Tenancy" in description:
            continue
        machine, gpu = _MACHINE.match(description), _GPU.match(description)
        if machine:
            table = cores if machine["kind"] == "Core" else ram
            key, spot = machine["family"].lower(), bool(machine["spot"])
        elif gpu:
            table, key, spot = gpus, _GPU_NAMES.get(gpu["name"], gpu["name"]), bool(gpu["spot"])
        else:
            continue
        for region in sku.get("serviceRegions", []):
            table[(key, region, spot)] = price
    return cores, ram, gpus


def _all_skus(base: str, key: str) -> list[dict[str, Any]]:
    skus: list[dict[str, Any]] = []
    token = ""
    while True:
        query = {"key": key, "pageSize": "5000"} | ({"pageToken": token} if token else {})
        page = get_json(f"{base}?{urllib.parse.urlencode(query)}")
        if not isinstance(page, dict):
            raise UpdateError("GCP billing catalog: unexpected response")
        skus += page.get("skus", [])
        token = page.get("nextPageToken", "")
        if not token:
            return skus


def fetch_rows(shapes: Catalog) -> list[Row]:
    """Catalog rows for the known machine types and GPUs, repriced from the billing catalog."""
    key = os.environ.get("GOOGLE_API_KEY", "")
    base = os.environ.get("SKYHOP_GCP_BILLING_URL", _URL)
    if not key and base == _URL:
        raise UpdateError("GCP pricing needs an API key: set GOOGLE_API_KEY (Cloud Billing API enabled)")
    cores, ram, gpus = _rates(_all_skus(base, key))

    def machine(name: str, region: str, spot: bool) -> float | None:
        t = shapes.types[name]
        family = name.split("-")[0]
        core, gib = cores.get((family, region, spot)), ram.get((family, region, spot))
        if core is None or gib is None:
            return None
        gpu = 0.0
        if t.accelerator:
            rate = gpus.get((t.accelerator, region, spot))
            if rate is None:
                return None
            gpu = rate * t.accelerator_count
        return round(t.cpus * core + t.memory_gib * gib + gpu, 6)

    rows: list[Row] = []
    for name, locations in shapes.locations.items():
        head = (name, *shape_of(shapes, name))
        for region, zone, kept_price, kept_spot in locations:
            if is_tpu(name):
                rows.append((*head, region, zone or "", kept_price, kept_spot))
                continue
            price, spot = machine(name, region, False), machine(name, region, True)
            if price is not None or spot is not None:
                rows.append((*head, region, zone or "", price, spot))
    for (accelerator, count), locations in shapes.attachable.items():
        memory = shapes.accelerator_memory_gib.get(accelerator)
        for region, zone, _, _ in locations:
            rate, spot_rate = gpus.get((accelerator, region, False)), gpus.get((accelerator, region, True))
            if rate is not None or spot_rate is not None:
                rows.append(
                    (
                        "",
                        None,
                        None,
                        accelerator,
                        count,
                        memory,
                        region,
                        zone or "",
                        None if rate is None else round(rate * count, 6),
                        None if spot_rate is None else round(spot_rate * count, 6),
                    )
                )
    return rows
