"""The ``fake_kubernetes`` fixture: a running fake cluster for a test module.

Use it from a conftest (``from tests.fakes.kubernetes.fixture import fake_kubernetes  # noqa: F401``)
or call ``running_fake`` for a cluster of other nodes.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.kubernetes.autoscaler import NodeGroup
from tests.fakes.kubernetes.cluster import FakeKubernetes
from tests.fakes.kubernetes.nodes import NodeSpec

__all__ = [
    "A100",
    "DEFAULT_NODES",
    "T4",
    "core_api",
    "failover_gap",
    "fake_kubernetes",
    "pod_manifest",
    "running_fake",
]

A100 = "NVIDIA-A100-SXM4-80GB"
T4 = "nvidia-tesla-t4"
DEFAULT_NODES = (
    NodeSpec("cpu-1", cpu="4", memory="16Gi"),
    NodeSpec("gpu-a100", cpu="8", memory="64Gi", gpus=2, labels={"nvidia.com/gpu.product": A100}),
    NodeSpec("gpu-t4", cpu="4", memory="16Gi", gpus=1, labels={"cloud.google.com/gke-accelerator": T4}),
)
"""A CPU node, a node with two A100s (NVIDIA's GPU feature discovery label) and one with a T4 (GKE's)."""


def running_fake(
    folder: Path, nodes: list[NodeSpec], context: str = "fake", node_groups: list[NodeGroup] | None = None
) -> Iterator[FakeKubernetes]:
    """A started fake, stopped after (every pod's processes killed by pid, namespaces and bridge
    removed); fails if anything inside the fake failed or a client asked for an unserved path."""
    fake = FakeKubernetes(folder, nodes, context=context, node_groups=node_groups)
    with fake:
        fake.kubeconfig()
        yield fake
        assert not fake.errors(), "the fake Kubernetes failed inside:\n" + "\n".join(fake.errors())


@pytest.fixture(scope="module")
def fake_kubernetes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeKubernetes]:
    """A fake cluster of ``DEFAULT_NODES`` for the module, with its kubeconfig at ``fake.kubeconfig()``
    (context ``fake``, namespace ``default``, HTTPS with the cluster's CA and a bearer token).

    Pods run as real processes, each in a network namespace with its own ``10.244.N.x`` address when the
    tests run as root (``fake.loopback`` False), else on loopback. Tests in a module share the cluster:
    give pods unique names and delete what they create, or read ``fake.pods()`` with a label of their
    own. Commands: ``fill_node``, ``cordon``, ``remove_node``, ``add_node``, ``evict``, ``oom_kill``,
    ``preempt``, ``fail_image_pull``; ``fake.writes()`` lists the API writes received.
    """
    yield from running_fake(tmp_path_factory.mktemp("k8s"), list(DEFAULT_NODES))


def failover_gap(first: FakeKubernetes, second: FakeKubernetes, cluster: str) -> float:
    """Seconds from the scheduler's FailedScheduling on one of ``cluster``'s pods in ``first`` to the
    creation of its first pod in ``second`` (the next attempt), as the fakes' stores recorded them."""
    failed = first.store.created_at(
        "events",
        lambda e: e["reason"] == "FailedScheduling" and e["involvedObject"]["name"].startswith(f"{cluster}-"),
    )
    tried = second.store.created_at("pods", lambda p: p["metadata"]["name"].startswith(f"{cluster}-"))
    assert failed is not None and tried is not None, f"{cluster}: no FailedScheduling, or no next attempt"
    return tried - failed


def core_api(fake: FakeKubernetes) -> Any:
    """A ``kubernetes`` ``CoreV1Api`` configured from the fake's kubeconfig, as a provider would be."""
    from kubernetes import client, config

    return client.CoreV1Api(config.new_client_from_config(str(fake.kubeconfig())))


def pod_manifest(
    name: str,
    command: list[str] | None = None,
    *,
    gpus: int = 0,
    cpu: str | None = None,
    memory: str | None = None,
    labels: dict[str, str] | None = None,
    node_selector: dict[str, str] | None = None,
    restart: str = "Never",
) -> dict[str, Any]:
    """A one-container pod (container ``main``) as a client would send it."""
    limits = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    if gpus:
        limits["nvidia.com/gpu"] = str(gpus)
    container: dict[str, Any] = {"name": "main", "image": "ubuntu:24.04", "resources": {"limits": limits}}
    if command is not None:
        container["command"] = command
    spec: dict[str, Any] = {
        "restartPolicy": restart,
        "containers": [container],
        "terminationGracePeriodSeconds": 2,
    }
    if node_selector:
        spec["nodeSelector"] = node_selector
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": spec,
    }
