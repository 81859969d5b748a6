"""The request bodies skyhop sends to GCP: one instance or TPU VM of a cluster, and its firewall rule.

GPUs are attached as ``guestAccelerators`` only to N1 machines (the A2/A3/G2 families have theirs
built in); any GPU machine must terminate on host maintenance, since GPUs cannot live-migrate.
Spot nodes are deleted when preempted, as AWS's one-time spot instances are, so a preempted node
reads as gone rather than stopped. A TPU VM (Cloud TPU API v2 ``Node``) carries the same labels,
SSH key and network tag as an instance, so it is found, reached and opened the same way.
"""

from __future__ import annotations

import uuid
from typing import Any

from skyhop.providers.base import AcceleratorArgs, DiskTier, NetworkTier, ProvisionRequest
from skyhop.providers.catalog.tpus import default_runtime_version, tpu_accelerator_type
from skyhop.providers.cloud import CLUSTER_TAG, RANK_TAG
from skyhop.providers.naming import fit_name

__all__ = [
    "DEFAULT_IMAGE",
    "NETWORK",
    "SSH_USER",
    "accelerator_type",
    "firewall_body",
    "firewall_name",
    "instance_body",
    "instance_name",
    "request_id",
    "tpu_node_body",
    "tpu_node_id",
    "zone_region",
]

SSH_USER = "skyhop"
DEFAULT_IMAGE = "projects/ubuntu-os-cloud/global/images/family/ubuntu-2204-lts"
NETWORK = "global/networks/default"
_MAX_NAME = 63
_ACCELERATORS = {
    "T4": "nvidia-tesla-t4",
    "V100": "nvidia-tesla-v100",
    "P100": "nvidia-tesla-p100",
    "P4": "nvidia-tesla-p4",
    "K80": "nvidia-tesla-k80",
    "L4": "nvidia-l4",
    "A100": "nvidia-tesla-a100",
    "A100-80GB": "nvidia-a100-80gb",
    "H100": "nvidia-h100-80gb",
}
_ATTACHING_FAMILIES = ("n1-",)


def zone_region(zone: str) -> str:
    """The region of a zone (``us-central1-a`` -> ``us-central1``)."""
    return zone.rsplit("-", 1)[0]


def instance_name(cluster_name: str, rank: int) -> str:
    """The instance of node ``rank``: the same name on every retry, so an insert cannot duplicate it."""
    return fit_name(cluster_name, _MAX_NAME, f"-{rank}")


def firewall_name(cluster_name: str) -> str:
    """The cluster's firewall rule, which is also the network tag its instances carry."""
    return fit_name(f"skyhop-{cluster_name}", _MAX_NAME)


def request_id(request: ProvisionRequest, rank: int) -> str:
    """GCP's idempotency token for one insert: the same for every retry of one attempt's rank."""
    seed = f"{request.attempt_id}|{request.cluster_name}|{request.offering.zone}|{rank}"
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"skyhop:{seed}"))


def accelerator_type(name: str) -> str:
    """GCP's accelerator type for a catalog accelerator name (``T4`` -> ``nvidia-tesla-t4``)."""
    return _ACCELERATORS.get(name, f"nvidia-{name.lower()}")


_TIER_DISKS = {
    DiskTier.LOW: "pd-standard",
    DiskTier.MEDIUM: "pd-balanced",
    DiskTier.HIGH: "pd-ssd",
    DiskTier.ULTRA: "pd-extreme",
    DiskTier.BEST: "pd-extreme",
}
"""SkyPilot's persistent disk type per disk tier."""


def disk_type(tier: DiskTier | None) -> str:
    """The boot disk's type: by tier, default ``pd-balanced`` (SkyPilot's ``medium``)."""
    return _TIER_DISKS[tier or DiskTier.MEDIUM]


def _labels(request: ProvisionRequest, rank: int) -> dict[str, str]:
    return {**request.labels, CLUSTER_TAG: request.cluster_name, RANK_TAG: str(rank)}


def _ssh_keys(public_key: str) -> str:
    """The ``ssh-keys`` metadata value that lets skyhop's login in."""
    return f"{SSH_USER}:{public_key}"


def wants_gvnic(request: ProvisionRequest) -> bool:
    """Whether the instances get a gVNIC: ``network_tier: best`` or ``config.gcp.enable_gvnic``."""
    return request.network_tier == NetworkTier.BEST or bool(request.overrides.gcp.enable_gvnic)


def instance_body(project: str, request: ProvisionRequest, rank: int, public_key: str) -> dict[str, Any]:
    """The ``instances.insert`` body of node ``rank`` (compute_v1 ``Instance`` fields)."""
    offering = request.offering
    zone = offering.zone or ""
    scheduling: dict[str, Any] = {}
    body: dict[str, Any] = {
        "name": instance_name(request.cluster_name, rank),
        "machine_type": f"zones/{zone}/machineTypes/{offering.instance_type}",
        "labels": _labels(request, rank),
        "tags": {"items": [firewall_name(request.cluster_name)]},
        "metadata": {"items": [{"key": "ssh-keys", "value": _ssh_keys(public_key)}]},
        "disks": [
            {
                "boot": True,
                "auto_delete": True,
                "initialize_params": {
                    "source_image": request.image_id or DEFAULT_IMAGE,
                    "disk_type": f"zones/{zone}/diskTypes/{disk_type(request.disk_tier)}",
                    **({"disk_size_gb": request.disk_size} if request.disk_size else {}),
                },
            }
        ],
        "network_interfaces": [
            {
                "network": NETWORK,
                "access_configs": [{"name": "External NAT", "type_": "ONE_TO_ONE_NAT"}],
                **({"nic_type": "GVNIC"} if wants_gvnic(request) else {}),
            }
        ],
    }
    if offering.accelerators:
        scheduling["on_host_maintenance"] = "TERMINATE"
        if offering.instance_type.startswith(_ATTACHING_FAMILIES):
            types = f"projects/{project}/zones/{zone}/acceleratorTypes"
            body["guest_accelerators"] = [
                {"accelerator_type": f"{types}/{accelerator_type(n)}", "accelerator_count": int(count)}
                for n, count in offering.accelerators.items()
            ]
    if request.use_spot:
        scheduling.update(
            provisioning_model="SPOT",
            instance_termination_action="DELETE",
            on_host_maintenance="TERMINATE",
            automatic_restart=False,
        )
    if scheduling:
        body["scheduling"] = scheduling
    return body


def tpu_node_id(request: ProvisionRequest, rank: int) -> str:
    """The TPU VM of node ``rank``: the task's ``tpu_name`` (``-<rank>`` after the first), else named as
    an instance is; the same on every retry, so a create meets ``ALREADY_EXISTS`` rather than duplicating."""
    name = request.accelerator_args.tpu_name if request.accelerator_args else None
    if name is None:
        return instance_name(request.cluster_name, rank)
    return name if rank == 0 else f"{name}-{rank}"


def tpu_node_body(project: str, request: ProvisionRequest, rank: int, public_key: str) -> dict[str, Any]:
    """The ``nodes.create`` body of TPU VM ``rank`` (Cloud TPU API v2 ``Node`` fields)."""
    slice_name = request.offering.instance_type
    args = request.accelerator_args or AcceleratorArgs()
    body: dict[str, Any] = {
        "acceleratorType": tpu_accelerator_type(slice_name),
        "runtimeVersion": args.runtime_version or default_runtime_version(slice_name),
        "networkConfig": {"network": f"projects/{project}/{NETWORK}", "enableExternalIps": True},
        "labels": _labels(request, rank),
        "tags": [firewall_name(request.cluster_name)],
        "metadata": {"ssh-keys": _ssh_keys(public_key)},
    }
    if request.use_spot:
        body["schedulingConfig"] = {"spot": True}
    return body


def firewall_body(cluster_name: str, ports: list[str]) -> dict[str, Any]:
    """A rule letting TCP traffic from anywhere reach ``ports`` on the cluster's tagged instances."""
    return {
        "name": firewall_name(cluster_name),
        "network": NETWORK,
        "direction": "INGRESS",
        "allowed": [{"I_p_protocol": "tcp", "ports": ports}],
        "source_ranges": ["0.0.0.0/0"],
        "target_tags": [firewall_name(cluster_name)],
        "description": f"skyhop cluster {cluster_name}",
    }
