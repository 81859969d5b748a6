"""Cloud TPU slices as catalog instance types: what a TPU VM is, and which ones skyhop launches.

A TPU VM is one offering: the slice (``tpu-v2-8``) and the host VM that comes with it, priced
together by the TPU's own hourly rate (the host is not billed apart). So each slice is an instance
type named after its accelerator, holding it once (SkyPilot's ``tpu-v2-8:1``), sized by its host.

A slice's name ends in its size: TensorCores for v2/v3/v4/v5p, chips for v5e (``v5litepod``) and
v6e; up to 8 of either are one host, more are a multi-host slice (a pod), which skyhop does not
launch yet: it would have to run the task on every host of the one TPU node.
"""

from __future__ import annotations

import re

from skyhop.providers.catalog.model import InstanceType

__all__ = [
    "MULTI_HOST_REFUSAL",
    "canonical_tpu",
    "TPU_PREFIX",
    "default_runtime_version",
    "is_multi_host",
    "is_tpu",
    "tpu_accelerator_type",
    "tpu_instance_type",
]

TPU_PREFIX = "tpu-"
_BARE = re.compile(r"^v[2-6](?:p|e|litepod)?-\d+$", re.IGNORECASE)
"""A slice named without ``tpu-`` (``v5litepod-8``, as Google names accelerator types)."""
_SIZE = re.compile(r"-(\d+)$")
_HOST_SIZE = 8
"""TensorCores (v2-v4, v5p) or chips (v5e, v6e) of the largest single-host slice."""

_HOSTS: dict[str, tuple[float, float]] = {
    "tpu-v2-8": (96, 334),
    "tpu-v3-8": (96, 340),
    "tpu-v4-8": (240, 407),
    "tpu-v5litepod-1": (24, 48),
    "tpu-v5litepod-4": (112, 192),
    "tpu-v5litepod-8": (224, 384),
    "tpu-v5p-8": (208, 448),
    "tpu-v6e-1": (44, 176),
    "tpu-v6e-4": (180, 720),
    "tpu-v6e-8": (180, 1440),
}
"""vCPUs and GiB of the host VM of each single-host slice (Google's TPU VM machine shapes)."""

_RUNTIMES = {"v5litepod": "v2-alpha-tpuv5-lite", "v5p": "v2-alpha-tpuv5", "v6e": "v2-alpha-tpuv6e"}
"""The base runtime of generations whose hosts do not boot ``tpu-vm-base``."""

MULTI_HOST_REFUSAL = (
    "is a multi-host TPU slice; skyhop launches single-host slices for now "
    "(tpu-v2-8, tpu-v3-8, tpu-v4-8, tpu-v5p-8, tpu-v5litepod-1/4/8, tpu-v6e-1/4/8)"
)


def canonical_tpu(name: str) -> str | None:
    """``tpu-v2-8`` for any spelling of a TPU slice (``TPU-V2-8``, ``v2-8``), or None for other names."""
    lowered = name.strip().lower()
    if lowered.startswith(TPU_PREFIX):
        return lowered
    return TPU_PREFIX + lowered if _BARE.match(lowered) else None


def is_tpu(name: str) -> bool:
    """Whether an accelerator (or the instance type named after it) is a TPU slice."""
    return canonical_tpu(name) is not None


def is_multi_host(name: str) -> bool:
    """Whether the slice spans several host VMs (``tpu-v4-32``)."""
    size = _SIZE.search(name)
    return size is not None and int(size.group(1)) > _HOST_SIZE


def tpu_accelerator_type(name: str) -> str:
    """The Cloud TPU API's ``acceleratorType`` of a slice: ``tpu-v2-8`` -> ``v2-8``."""
    return (canonical_tpu(name) or name).removeprefix(TPU_PREFIX)


def default_runtime_version(name: str) -> str:
    """The software a slice boots when the task names none: its generation's base runtime."""
    generation = tpu_accelerator_type(name).rsplit("-", 1)[0]
    return _RUNTIMES.get(generation, "tpu-vm-base")


def tpu_instance_type(accelerator: str) -> InstanceType | None:
    """The TPU VM offering of a single-host slice, or None for a slice skyhop does not launch."""
    name = canonical_tpu(accelerator)
    host = _HOSTS.get(name or "")
    if name is None or host is None:
        return None
    return InstanceType(name=name, cpus=host[0], memory_gib=host[1], accelerator=name, accelerator_count=1.0)
