"""The fake's scheduler: GPU pods land on GPU nodes, what fits nowhere gets FailedScheduling at once."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tests.fakes.kubernetes import FakeKubernetes, NodeSpec
from tests.fakes.kubernetes.fixture import A100, core_api, pod_manifest, running_fake
from tests.helpers import wait_for


def _failed_scheduling(fake: FakeKubernetes, name: str) -> list[dict[str, Any]]:
    return [e for e in fake.events(name) if e["reason"] == "FailedScheduling"]


def test_a_gpu_pod_lands_on_the_labelled_gpu_node(fake_kubernetes: FakeKubernetes) -> None:
    api = core_api(fake_kubernetes)
    selector = {"nvidia.com/gpu.product": A100}
    api.create_namespaced_pod(
        "default", pod_manifest("a100", ["sleep", "600"], gpus=2, node_selector=selector)
    )
    pod = fake_kubernetes.wait_pod("a100", "Running")
    assert pod["spec"]["nodeName"] == "gpu-a100"
    scheduled = [e for e in fake_kubernetes.events("a100") if e["reason"] == "Scheduled"]
    assert scheduled[0]["message"] == "Successfully assigned default/a100 to gpu-a100"
    out = api.connect_get_namespaced_pod_exec  # the pod sees its GPUs through the fake nvidia-smi
    from kubernetes.stream import stream

    listed = stream(
        out, "a100", "default", command=["nvidia-smi"], stdout=True, stderr=True, stdin=False, tty=False
    )
    assert listed.splitlines() == ["NVIDIA A100 SXM4 80GB"] * 2
    api.delete_namespaced_pod("a100", "default", grace_period_seconds=0)


def test_an_oversize_pod_gets_failed_scheduling_within_a_second(fake_kubernetes: FakeKubernetes) -> None:
    api = core_api(fake_kubernetes)
    started = time.monotonic()
    api.create_namespaced_pod("default", pod_manifest("huge", ["sleep", "600"], gpus=8))
    wait_for(lambda: _failed_scheduling(fake_kubernetes, "huge"), 1, "FailedScheduling")
    assert time.monotonic() - started < 1
    message = _failed_scheduling(fake_kubernetes, "huge")[0]["message"]
    assert message == (
        "0/3 nodes are available: 3 Insufficient nvidia.com/gpu. preemption: 0/3 nodes are available: "
        "3 No preemption victims found for incoming pod."
    )
    pod = api.read_namespaced_pod("huge", "default")
    condition = {c.type: c for c in pod.status.conditions}["PodScheduled"]
    assert (pod.status.phase, condition.status, condition.reason) == ("Pending", "False", "Unschedulable")
    events = api.list_namespaced_event(
        "default", field_selector="involvedObject.name=huge,reason=FailedScheduling"
    )
    assert [e.type for e in events.items] == ["Warning"]
    api.delete_namespaced_pod("huge", "default")
    assert fake_kubernetes.pod("huge") is None


def test_a_full_node_refuses_and_frees_when_its_tenant_leaves(tmp_path: Path) -> None:
    nodes = [
        NodeSpec("gpu-1", gpus=1, labels={"skypilot.co/accelerator": "h100"}),
        NodeSpec("cpu-1", cpu="2"),
    ]
    for fake in running_fake(tmp_path, nodes):
        api = core_api(fake)
        hog = fake.fill_node("gpu-1")
        api.create_namespaced_pod("default", pod_manifest("waits", ["sleep", "600"], gpus=1, cpu="1"))
        wait_for(lambda f=fake: _failed_scheduling(f, "waits"), 5, "FailedScheduling")
        assert _failed_scheduling(fake, "waits")[0]["message"].startswith(
            "0/2 nodes are available: 1 Insufficient cpu, 2 Insufficient nvidia.com/gpu."
        )
        api.delete_namespaced_pod(hog, "other-team", grace_period_seconds=0)
        assert fake.wait_pod("waits", "Running")["spec"]["nodeName"] == "gpu-1"


def test_cordon_taints_and_selectors_say_why(tmp_path: Path) -> None:
    taint = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    nodes = [NodeSpec("tainted", gpus=1, taints=[taint]), NodeSpec("cordoned"), NodeSpec("plain")]
    for fake in running_fake(tmp_path, nodes):
        api = core_api(fake)
        fake.cordon("cordoned")
        api.create_namespaced_pod("default", pod_manifest("picky", ["true"], node_selector={"pool": "x"}))
        wait_for(lambda f=fake: _failed_scheduling(f, "picky"), 5, "FailedScheduling")
        assert _failed_scheduling(fake, "picky")[0]["message"] == (
            "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) had "
            "untolerated taint {nvidia.com/gpu: present}, 1 node(s) were unschedulable. "
            "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
        )
        tolerant = pod_manifest("tolerant", ["sleep", "600"], gpus=1)
        tolerant["spec"]["tolerations"] = [
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
        ]
        api.create_namespaced_pod("default", tolerant)
        assert fake.wait_pod("tolerant", "Running")["spec"]["nodeName"] == "tainted"


def test_the_autoscaler_adds_a_node_or_says_why_not(tmp_path: Path) -> None:
    from tests.fakes.kubernetes import NodeGroup

    t4 = NodeSpec("template", gpus=1, labels={"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"})
    group = NodeGroup("pool-t4", t4, max_size=1, delay=0.5)  # fmt: skip
    for fake in running_fake(tmp_path, [NodeSpec("cpu-1")], node_groups=[group]):
        api = core_api(fake)
        api.create_namespaced_pod("default", pod_manifest("scales", ["sleep", "600"], gpus=1))
        assert fake.wait_pod("scales", "Running")["spec"]["nodeName"] == "pool-t4-1"
        reasons = [e["reason"] for e in fake.events("scales")]
        assert (
            reasons.index("FailedScheduling") < reasons.index("TriggeredScaleUp") < reasons.index("Scheduled")
        )
        triggered = next(e for e in fake.events("scales") if e["reason"] == "TriggeredScaleUp")
        assert triggered["message"] == "pod triggered scale-up: [{pool-t4 0->1 (max: 1)}]"
        api.create_namespaced_pod("default", pod_manifest("too-big", ["sleep", "600"], gpus=4))
        wait_for(
            lambda f=fake: any(e["reason"] == "NotTriggerScaleUp" for e in f.events("too-big")),
            10,
            "NotTriggerScaleUp",
        )
        refused = next(e for e in fake.events("too-big") if e["reason"] == "NotTriggerScaleUp")
        assert refused["message"] == "pod didn't trigger scale-up: 1 Insufficient nvidia.com/gpu"
