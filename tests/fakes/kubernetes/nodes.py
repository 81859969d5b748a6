"""Node objects as a kubelet registers them: labels, ``capacity``/``allocatable``, ``Ready``, addresses."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

__all__ = ["GPU_LABELS", "GPU_RESOURCES", "NodeSpec"]

GPU_LABELS = (
    "nvidia.com/gpu.product",
    "cloud.google.com/gke-accelerator",
    "skypilot.co/accelerator",
    "amd.com/gpu.product-name",
)
"""Labels that name a node's GPU type (NVIDIA's GPU feature discovery, GKE, SkyPilot's own, AMD's)."""
GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu")


@dataclass
class NodeSpec:
    """A node to register: ``gpus`` of ``gpu_resource`` (their type goes in one of ``GPU_LABELS``)."""

    name: str
    cpu: str = "4"
    memory: str = "16Gi"
    gpus: int = 0
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, str]] = field(default_factory=list)
    pods: int = 110
    gpu_resource: str = GPU_RESOURCES[0]

    def object(self, address: str) -> dict[str, Any]:
        resources = {
            "cpu": self.cpu,
            "memory": self.memory,
            "pods": str(self.pods),
            "ephemeral-storage": "100Gi",
        }
        if self.gpus:
            resources[self.gpu_resource] = str(self.gpus)
        labels = {
            "kubernetes.io/hostname": self.name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/os": "linux",
            "beta.kubernetes.io/arch": "amd64",
            **self.labels,
        }
        return {
            "metadata": {"name": self.name, "labels": labels, "annotations": {}},
            "spec": {"podCIDR": "10.244.0.0/24", **({"taints": list(self.taints)} if self.taints else {})},
            "status": {
                "capacity": dict(resources),
                "allocatable": dict(resources),
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "message": "kubelet is posting ready status",
                    }
                ],
                "addresses": [
                    {"type": "InternalIP", "address": address},
                    {"type": "Hostname", "address": self.name},
                ],
                "nodeInfo": {
                    "kubeletVersion": "v1.32.0",
                    "kubeProxyVersion": "v1.32.0",
                    "containerRuntimeVersion": "containerd://1.7.24",
                    "osImage": "skyhop fake node",
                    "kernelVersion": "fake",
                    "operatingSystem": "linux",
                    "architecture": "amd64",
                    "bootID": str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{self.name}.boot")),
                    "machineID": uuid.uuid5(uuid.NAMESPACE_DNS, self.name).hex,
                    "systemUUID": str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{self.name}.system")),
                },
            },
        }
