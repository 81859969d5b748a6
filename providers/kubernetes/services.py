"""A cluster's ``resources.ports`` as one Service in front of its head pod.

SkyPilot's default way out of a cluster is a ``LoadBalancer`` Service: on clusters without a load
balancer it still gets node ports. It is labelled with the cluster, as the pods are, so ``down``
deletes it by the same selector and a retried create meets ``AlreadyExists``.
"""

from __future__ import annotations

from typing import Any

from skyhop.providers.kubernetes.pods import CLUSTER_LABEL, MANAGED_BY, RANK_LABEL
from skyhop.providers.naming import fit_name

__all__ = ["service_manifest", "service_name"]


def service_name(cluster_name: str) -> str:
    """The cluster's Service: a DNS label, the same on every retry."""
    return fit_name(cluster_name, 63, "-ports")


def _numbers(ports: list[str]) -> list[int]:
    """``8080`` and ``8000-8010`` (as ``resources.ports`` has validated them) as port numbers."""
    found: set[int] = set()
    for item in ports:
        low, _, high = item.partition("-")
        found.update(range(int(low), int(high or low) + 1))
    return sorted(found)


def service_manifest(cluster_name: str, ports: list[str]) -> dict[str, Any]:
    """A Service sending each of ``ports`` to the same port of the cluster's head pod."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": service_name(cluster_name),
            "labels": {CLUSTER_LABEL: cluster_name, **MANAGED_BY},
        },
        "spec": {
            "type": "LoadBalancer",
            "selector": {CLUSTER_LABEL: cluster_name, RANK_LABEL: "0"},
            "ports": [{"name": f"port-{n}", "port": n, "targetPort": n} for n in _numbers(ports)],
        },
    }
