"""Naming what a probe finds: GPU names as SkyPilot spells them, host shapes as instance types."""

from __future__ import annotations

import pytest

from skyhop.providers.accelerators import gpu_name, label_gpu_name
from skyhop.providers.ssh.inventory import HostFacts


@pytest.mark.parametrize(
    ("raw", "name"),
    [
        ("NVIDIA A100-SXM4-80GB", "A100-80GB"),
        ("NVIDIA A100-SXM4-40GB", "A100"),
        ("NVIDIA H100 80GB HBM3", "H100"),
        ("Tesla T4", "T4"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA GeForce RTX 4090", "RTX4090"),
        ("NVIDIA RTX A6000", "A6000"),
        ("NVIDIA Quadro P2000", "QUADRO-P2000"),
    ],
)
def test_gpu_names_follow_skypilot(raw: str, name: str) -> None:
    assert gpu_name(raw) == name


@pytest.mark.parametrize(
    ("label", "name"),
    [
        ("NVIDIA-A100-SXM4-80GB", "A100-80GB"),
        ("nvidia-tesla-t4", "T4"),
        ("nvidia-h100-80gb", "H100"),
        ("nvidia-l4", "L4"),
        ("a100-80gb", "A100-80GB"),
        ("nvidia-tesla-p4", "P4"),
    ],
)
def test_gpu_names_from_node_labels(label: str, name: str) -> None:
    assert label_gpu_name(label) == name


def test_a_hosts_shape_names_its_size_and_gpus() -> None:
    facts = HostFacts(
        hostname="h", home="/root", cpus=8, memory_gib=31.3, accelerators={"A100": 2.0}, rsync=True
    )
    assert facts.shape == "8CPU--31.3GB--A100:2"
    assert facts.model_copy(update={"accelerators": {}}).shape == "8CPU--31.3GB"
