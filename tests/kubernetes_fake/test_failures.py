"""How pods end in the fake, as the pod's status tells it: exit codes, OOM kills, evictions, lost nodes."""

from __future__ import annotations

from typing import Any

from tests.fakes.kubernetes import FakeKubernetes
from tests.fakes.kubernetes.fixture import core_api, pod_manifest
from tests.helpers import wait_for


def _terminated(pod: dict[str, Any]) -> dict[str, Any]:
    return dict(pod["status"]["containerStatuses"][0]["state"]["terminated"])


def _condition(pod: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in pod["status"]["conditions"] if c["type"] == kind)


def test_exit_codes_become_completed_and_error(fake_kubernetes: FakeKubernetes) -> None:
    api = core_api(fake_kubernetes)
    api.create_namespaced_pod("default", pod_manifest("ok", ["sh", "-c", "echo done"]))
    api.create_namespaced_pod("default", pod_manifest("bad", ["sh", "-c", "exit 7"]))
    done = fake_kubernetes.wait_pod("ok", "Succeeded")
    assert (_terminated(done)["exitCode"], _terminated(done)["reason"]) == (0, "Completed")
    failed = fake_kubernetes.wait_pod("bad", "Failed")
    assert (_terminated(failed)["exitCode"], _terminated(failed)["reason"]) == (7, "Error")
    assert api.read_namespaced_pod_log("ok", "default") == "done\n"
    for name in ("ok", "bad"):
        api.delete_namespaced_pod(name, "default")


def test_oom_kill_on_command_and_over_the_memory_limit(fake_kubernetes: FakeKubernetes) -> None:
    api = core_api(fake_kubernetes)
    api.create_namespaced_pod("default", pod_manifest("victim", ["sleep", "600"], memory="1Gi"))
    fake_kubernetes.wait_pod("victim", "Running")
    fake_kubernetes.oom_kill("victim")
    killed = fake_kubernetes.wait_pod("victim", "Failed")
    assert (_terminated(killed)["exitCode"], _terminated(killed)["reason"]) == (137, "OOMKilled")
    hungry = ["python3", "-c", "import time; b = bytearray(200 * 2**20); time.sleep(600)"]
    api.create_namespaced_pod("default", pod_manifest("hungry", hungry, memory="64Mi"))
    over = fake_kubernetes.wait_pod("hungry", "Failed")
    assert (_terminated(over)["exitCode"], _terminated(over)["reason"]) == (137, "OOMKilled")
    for name in ("victim", "hungry"):
        api.delete_namespaced_pod(name, "default")


def test_a_restarting_container_counts_its_restarts(fake_kubernetes: FakeKubernetes) -> None:
    api = core_api(fake_kubernetes)
    api.create_namespaced_pod("default", pod_manifest("flaky", ["sh", "-c", "exit 1"], restart="OnFailure"))

    def restarted() -> bool:
        pod = fake_kubernetes.pod("flaky")
        statuses = (pod or {}).get("status", {}).get("containerStatuses") or [{}]
        return bool(
            statuses[0].get("restartCount", 0) >= 1 and statuses[0].get("lastState", {}).get("terminated")
        )

    wait_for(restarted, 20, "a restart")
    pod = fake_kubernetes.pod("flaky")
    assert pod is not None and pod["status"]["phase"] == "Running"
    api.delete_namespaced_pod("flaky", "default", grace_period_seconds=0)


def test_node_pressure_eviction_leaves_a_failed_evicted_pod(fake_kubernetes: FakeKubernetes) -> None:
    api = core_api(fake_kubernetes)
    api.create_namespaced_pod("default", pod_manifest("evictee", ["sleep", "600"]))
    fake_kubernetes.wait_pod("evictee", "Running")
    fake_kubernetes.evict("evictee")
    pod = api.read_namespaced_pod("evictee", "default")
    assert (pod.status.phase, pod.status.reason) == ("Failed", "Evicted")
    assert pod.status.message.startswith("The node was low on resource: memory.")
    disruption = {c.type: c for c in pod.status.conditions}["DisruptionTarget"]
    assert (disruption.status, disruption.reason) == ("True", "TerminationByKubelet")
    assert pod.status.container_statuses[0].state.terminated.exit_code == 137
    assert "Evicted" in [e["reason"] for e in fake_kubernetes.events("evictee")]
    api.delete_namespaced_pod("evictee", "default")


def test_the_eviction_api_deletes_the_pod_gracefully(fake_kubernetes: FakeKubernetes) -> None:
    from kubernetes import client, watch

    api = core_api(fake_kubernetes)
    api.create_namespaced_pod("default", pod_manifest("drained", ["sleep", "600"], labels={"t": "drain"}))
    fake_kubernetes.wait_pod("drained", "Running")
    since = api.list_namespaced_pod("default").metadata.resource_version
    eviction = client.V1Eviction(metadata=client.V1ObjectMeta(name="drained", namespace="default"))
    api.create_namespaced_pod_eviction("drained", "default", eviction)
    seen = []
    for event in watch.Watch().stream(api.list_namespaced_pod, "default", label_selector="t=drain",
                                      resource_version=since, timeout_seconds=20):  # fmt: skip
        seen.append(event)
        if event["type"] == "DELETED":
            break
    assert seen[-1]["type"] == "DELETED"
    reasons = [c.reason for c in seen[0]["object"].status.conditions if c.type == "DisruptionTarget"]
    assert reasons == ["EvictionByEvictionAPI"]
    assert seen[-2]["object"].metadata.deletion_timestamp is not None


def test_a_lost_node_takes_its_pods(fake_kubernetes: FakeKubernetes) -> None:
    from tests.fakes.kubernetes.fixture import DEFAULT_NODES

    api = core_api(fake_kubernetes)
    on_t4 = {"kubernetes.io/hostname": "gpu-t4"}
    api.create_namespaced_pod("default", pod_manifest("orphan", ["sleep", "600"], node_selector=on_t4))
    fake_kubernetes.wait_pod("orphan", "Running")
    assert fake_kubernetes.kubelet is not None
    run = fake_kubernetes.kubelet.running("default", "orphan")
    assert run is not None and run.sandbox.pids()
    fake_kubernetes.remove_node("gpu-t4")
    try:
        wait_for(lambda: fake_kubernetes.pod("orphan") is None, 10, "PodGC to delete the pod")
        wait_for(lambda: not run.sandbox.pids(), 10, "the pod's processes to die")
    finally:
        fake_kubernetes.add_node(next(n for n in DEFAULT_NODES if n.name == "gpu-t4"))


def test_an_image_that_cannot_be_pulled_waits_with_its_reason(fake_kubernetes: FakeKubernetes) -> None:
    api = core_api(fake_kubernetes)
    fake_kubernetes.fail_image_pull("nosuch/image:1")
    manifest = pod_manifest("pull", ["true"])
    manifest["spec"]["containers"][0]["image"] = "nosuch/image:1"
    api.create_namespaced_pod("default", manifest)

    def waiting() -> str:
        pod = fake_kubernetes.pod("pull") or {}
        statuses = pod.get("status", {}).get("containerStatuses") or [{}]
        return str(statuses[0].get("state", {}).get("waiting", {}).get("reason", ""))

    wait_for(lambda: waiting() == "ImagePullBackOff", 10, "ImagePullBackOff")
    pod = fake_kubernetes.pod("pull")
    assert pod is not None and pod["status"]["phase"] == "Pending"
    assert any(
        'Failed to pull image "nosuch/image:1"' in e["message"] for e in fake_kubernetes.events("pull")
    )
    api.delete_namespaced_pod("pull", "default", grace_period_seconds=0)
