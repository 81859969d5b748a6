"""Reading SkyPilot's v8 catalog layout (``<dir>/<cloud>/vms.csv``), so both optimizers can be fed
the same data.

v8 differs from skyhop's layout in two ways: columns are named ``InstanceType, vCPUs, MemoryGiB,
AcceleratorName, AcceleratorCount, GpuInfo, Region, AvailabilityZone, Price, SpotPrice``, and GCP
lists every GPU as a separate row without an instance type. GCP's accelerator-optimised machines
(a2, a3, a4, g2, g4) cannot be had without their GPUs, so here each is joined with its GPUs' row in
the same zone into one all-inclusive offering; the remaining GPU rows (T4, V100, ...) stay
attachable to N1 hosts. A single-host TPU slice's row becomes its TPU VM instance type (``tpus.py``);
multi-host slices, which skyhop does not launch, are skipped.
"""

from __future__ import annotations

import re
from pathlib import Path

from skyhop.providers.catalog.model import Catalog, InstanceType, Location
from skyhop.providers.catalog.policy import GCP_BUILTIN_ACCELERATORS, gcp_builtin_accelerator
from skyhop.providers.catalog.rows import CsvRows
from skyhop.providers.catalog.tpus import is_tpu, tpu_instance_type

__all__ = ["read_skypilot_v8"]

_REQUIRED = ("InstanceType", "vCPUs", "MemoryGiB", "AcceleratorName", "AcceleratorCount", "Region", "Price")
_GPU_MIB = re.compile(r"SizeInMiB'?\"?\s*:\s*(\d+)")


def _gpu_memory_gib(info: str) -> float | None:
    match = _GPU_MIB.search(info or "")
    return int(match.group(1)) / 1024 if match else None


def read_skypilot_v8(provider: str, path: Path) -> Catalog:
    """Parse ``<dir>/<provider>/vms.csv`` in SkyPilot's v8 layout."""
    catalog = Catalog(provider=provider, source=str(path))
    rows = CsvRows(path, _REQUIRED, "SkyPilot's v8 columns " + ",".join(_REQUIRED))
    gpu_rows: dict[tuple[str, int], dict[tuple[str, str | None], Location]] = {}
    builtin: list[tuple[InstanceType, tuple[str, int], Location]] = []
    for row in rows:
        name = row["InstanceType"].strip()
        accelerator = row["AcceleratorName"].strip() or None
        location: Location = (
            row["Region"].strip(),
            (row.get("AvailabilityZone") or "").strip() or None,
            rows.number(row, "Price"),
            rows.number(row, "SpotPrice"),
        )
        if not location[0]:
            raise rows.error("column Region is empty")
        if location[2] is None and location[3] is None:
            continue
        count = rows.number(row, "AcceleratorCount") or 0.0
        if not name and accelerator and is_tpu(accelerator):
            tpu_vm = tpu_instance_type(accelerator)
            if tpu_vm is not None:
                catalog.add(tpu_vm, location)
            continue
        if not name:
            if accelerator:
                memory = _gpu_memory_gib(row.get("GpuInfo", ""))
                gpu_rows.setdefault((accelerator, int(count)), {})[(location[0], location[1])] = location
                catalog.add_attachable(accelerator, count, memory, location)
            continue
        itype = InstanceType(
            name=name,
            cpus=rows.number(row, "vCPUs", required=True) or 0.0,
            memory_gib=rows.number(row, "MemoryGiB", required=True) or 0.0,
            accelerator=accelerator,
            accelerator_count=count,
            accelerator_memory_gib=_gpu_memory_gib(row.get("GpuInfo", "")),
        )
        folded = gcp_builtin_accelerator(name) if provider == "gcp" else None
        if folded is not None:
            builtin.append((itype, folded, location))
        else:
            catalog.add(itype, location)
    for itype, (accelerator, count), vm in builtin:
        gpu = gpu_rows.get((accelerator, count), {}).get((vm[0], vm[1]))
        if gpu is None:
            continue
        price = None if vm[2] is None or gpu[2] is None else round(vm[2] + gpu[2], 6)
        spot = None if vm[3] is None or gpu[3] is None else round(vm[3] + gpu[3], 6)
        memory = catalog.accelerator_memory_gib.get(accelerator)
        with_gpus = InstanceType(itype.name, itype.cpus, itype.memory_gib, accelerator, float(count), memory)
        catalog.add(with_gpus, (vm[0], vm[1], price, spot))
    if provider == "gcp":
        catalog.attachable = {
            k: v for k, v in catalog.attachable.items() if k[0] not in GCP_BUILTIN_ACCELERATORS
        }
    return catalog
