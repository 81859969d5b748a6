"""GPU names as SkyPilot spells them (``A100-80GB``, ``T4``), from what a machine or a cluster calls them.

``nvidia-smi`` on an SSH host says ``NVIDIA A100-SXM4-80GB``; a Kubernetes node's label says
``NVIDIA-A100-SXM4-80GB`` (NVIDIA's GPU feature discovery), ``nvidia-tesla-t4`` (GKE), ``a100-80gb``
(SkyPilot's own label) or ``AMD_Instinct_MI300X_OAM`` (AMD's labeller). Tasks ask for the SkyPilot
name, so every provider reports that one.
"""

from __future__ import annotations

import re

__all__ = ["gpu_name", "label_gpu_name"]

_KNOWN_GPUS = ["MI355X", "MI325X", "MI300X", "MI300", "MI250X", "MI250", "MI210", "MI100",
               "H200", "H100", "A100-80GB", "A100", "L40S", "L40", "L4", "A10G", "A10", "T4", "V100",
               "P100", "K80", "A6000", "A5000", "A4000", "RTX4090", "RTX3090"]  # fmt: skip


def gpu_name(raw: str) -> str:
    """SkyPilot's name for what ``nvidia-smi`` calls a GPU: ``NVIDIA A100-SXM4-80GB`` is ``A100-80GB``."""
    compact = re.sub(r"\s+", "", raw.upper())
    for name in _KNOWN_GPUS:
        base, _, memory = name.partition("-")
        if base in compact and (not memory or memory in compact):
            return name
    words = [w for w in raw.upper().split() if w not in ("NVIDIA", "TESLA", "GEFORCE", "AMD", "INSTINCT")]
    return "-".join(words) or raw.strip()


def label_gpu_name(value: str) -> str:
    """The GPU a node label names (``nvidia-tesla-t4`` is ``T4``): labels use '-' where names use spaces."""
    return gpu_name(re.sub(r"[-_]+", " ", value))
