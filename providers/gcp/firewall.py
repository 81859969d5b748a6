"""The cluster's firewall rule, shared by its instances and TPU VMs: both carry its network tag."""

from __future__ import annotations

from skyhop.providers.gcp import bodies
from skyhop.providers.gcp.api import ComputeApi

__all__ = ["ensure_firewall", "remove_firewall"]


def ensure_firewall(api: ComputeApi, cluster_name: str, ports: list[str]) -> None:
    """The cluster's rule exists and allows SSH and ``ports`` (created once, widened as needed)."""
    from google.api_core.exceptions import Conflict, NotFound
    from google.cloud import compute_v1

    name = bodies.firewall_name(cluster_name)
    wanted = ["22", *ports]
    try:
        rule = api.firewalls.get(project=api.project, firewall=name, **api.options)
    except NotFound:
        try:
            operation = api.firewalls.insert(
                project=api.project,
                firewall_resource=compute_v1.Firewall(bodies.firewall_body(cluster_name, wanted)),
                **api.options,
            )
        except Conflict:
            return
        api.wait(operation)
        return
    have = [port for allowed in rule.allowed for port in allowed.ports]
    if set(wanted) <= set(have):
        return
    ports_now = have + [p for p in wanted if p not in have]
    operation = api.firewalls.patch(
        project=api.project,
        firewall=name,
        firewall_resource=compute_v1.Firewall(allowed=[{"I_p_protocol": "tcp", "ports": ports_now}]),
        **api.options,
    )
    api.wait(operation)


def remove_firewall(api: ComputeApi, cluster_name: str) -> None:
    """Delete the cluster's rule (idempotent)."""
    from google.api_core.exceptions import NotFound

    try:
        operation = api.firewalls.delete(
            project=api.project, firewall=bodies.firewall_name(cluster_name), **api.options
        )
    except NotFound:
        return
    api.wait(operation)
