"""Offerings come from the cluster: free capacity per node, GPUs named from node labels."""

from __future__ import annotations

from pathlib import Path

from skyhop.providers.kubernetes.offerings import read_offerings
from tests.fakes.kubernetes import FakeKubernetes, NodeSpec
from tests.fakes.kubernetes.fixture import core_api, pod_manifest, running_fake


def _shapes(fake: FakeKubernetes) -> list[str]:
    return [o.instance_type for o in read_offerings(kubeconfig=str(fake.kubeconfig()))]


def test_each_node_offers_what_is_left_on_it(fake_kubernetes: FakeKubernetes) -> None:
    offerings = read_offerings(kubeconfig=str(fake_kubernetes.kubeconfig()))
    assert [(o.instance_type, o.region, o.price) for o in offerings] == [
        ("4CPU--16GB", "fake", 0.0),
        ("4CPU--16GB--T4:1", "fake", 0.0),
        ("8CPU--64GB--A100-80GB:2", "fake", 0.0),
    ]
    a100 = next(o for o in offerings if "A100" in o.instance_type)
    assert (a100.provider, a100.cpus, a100.memory_gib, a100.accelerators) == (
        "kubernetes",
        8,
        64,
        {"A100-80GB": 2},
    )
    api = core_api(fake_kubernetes)
    on_a100 = {"kubernetes.io/hostname": "gpu-a100"}
    busy = pod_manifest("busy", ["sleep", "600"], gpus=1, cpu="2500m", memory="8Gi", node_selector=on_a100)
    api.create_namespaced_pod("default", busy)
    fake_kubernetes.wait_pod("busy", "Running")
    done = pod_manifest("done", ["true"], gpus=1, node_selector=on_a100)
    api.create_namespaced_pod("default", done)
    fake_kubernetes.wait_pod("done", "Succeeded")
    assert "5.5CPU--56GB--A100-80GB:1" in _shapes(fake_kubernetes)
    fake_kubernetes.cordon("gpu-t4")
    try:
        assert not any("T4" in shape for shape in _shapes(fake_kubernetes))
    finally:
        fake_kubernetes.cordon("gpu-t4", unschedulable=False)
    for name in ("busy", "done"):
        api.delete_namespaced_pod(name, "default", grace_period_seconds=0)


def test_gpu_labels_of_every_flavour_and_other_tenants_count(tmp_path: Path) -> None:
    nodes = [
        NodeSpec("sky", cpu="16", memory="128Gi", gpus=8, labels={"skypilot.co/accelerator": "h100"}),
        NodeSpec("unlabelled", cpu="2", memory="8Gi", gpus=1),
        NodeSpec("full", cpu="2", memory="8Gi"),
    ]
    for fake in running_fake(tmp_path, nodes, context="lab"):
        fake.fill_node("full")
        offerings = read_offerings(context="lab", kubeconfig=str(fake.kubeconfig()))
        assert [(o.instance_type, o.region) for o in offerings] == [
            ("16CPU--128GB--H100:8", "lab"),
            ("2CPU--8GB", "lab"),
        ]


def test_amd_gpus_are_offered_and_asked_for_by_their_own_resource(tmp_path: Path) -> None:
    """AMD's device plugin registers ``amd.com/gpu`` and its labeller names the product; SkyPilot's
    AMD examples ask for ``MI300:1`` on a node of eight, so the pod asks for one ``amd.com/gpu``."""
    from skyhop.optimizer.launchables import offering_filter
    from skyhop.providers.base import NodeRequest
    from skyhop.providers.kubernetes.pods import pod_manifest as skyhop_pod
    from skyhop.spec import Resources

    nodes = [
        NodeSpec(
            "mi300",
            cpu="96",
            memory="512Gi",
            gpus=8,
            labels={"amd.com/gpu.product-name": "AMD_Instinct_MI300X_OAM"},
            gpu_resource="amd.com/gpu",
        ),
        NodeSpec(
            "mi210",
            cpu="32",
            memory="128Gi",
            gpus=4,
            labels={"skypilot.co/accelerator": "mi210"},
            gpu_resource="amd.com/gpu",
        ),
    ]
    for fake in running_fake(tmp_path, nodes, context="amd"):
        offerings = read_offerings(context="amd", kubeconfig=str(fake.kubeconfig()))
        assert sorted(o.instance_type for o in offerings) == [
            "32CPU--128GB--MI210:4",
            "96CPU--512GB--MI300X:8",
        ]
        mi300x = next(o for o in offerings if "MI300X" in o.instance_type)
        assert offering_filter(Resources(accelerators="MI300X:1"))(mi300x)
        pod = skyhop_pod("job", 0, mi300x, NodeRequest(accelerators={"MI300X": 1}), "ubuntu", [])
        limits = pod["spec"]["containers"][0]["resources"]["limits"]
        assert limits["amd.com/gpu"] == "1" and "nvidia.com/gpu" not in limits
