"""``config.kubernetes``: the task's pod_config and custom_metadata in the pods skyhop creates."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from skyhop.providers.base import ProvisionRequest
from skyhop.providers.kubernetes.offerings import read_offerings
from skyhop.providers.kubernetes.pods import CLUSTER_LABEL, merge_pod_config
from skyhop.providers.kubernetes.provider import KubernetesProvider
from skyhop.providers.overrides import KubernetesOverrides, ProviderOverrides
from tests.conftest import run
from tests.fakes.kubernetes import FakeKubernetes
from tests.integration.support import unique_cluster
from tests.kubernetes.conftest import use_kubeconfig

POD_CONFIG = {
    "metadata": {"labels": {CLUSTER_LABEL: "not-this", "team": "ml"}},
    "spec": {
        "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [
            {
                "name": "renamed",
                "command": ["false"],
                "env": [{"name": "NCCL_DEBUG", "value": "INFO"}],
                "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}},
                "resources": {"limits": {"ephemeral-storage": "10Gi", "cpu": "999"}},
            }
        ],
    },
}
OVERRIDES = KubernetesOverrides(pod_config=POD_CONFIG, custom_metadata={"annotations": {"owner": "me"}})


def test_the_pod_config_is_merged_in_and_skyhops_own_values_win() -> None:
    ours = {
        "metadata": {"name": "c-0", "labels": {CLUSTER_LABEL: "c"}},
        "spec": {
            "tolerations": [{"key": "ours"}],
            "containers": [{"name": "node", "command": ["sleep"], "resources": {"limits": {"cpu": "2"}}}],
        },
    }
    pod = merge_pod_config(ours, OVERRIDES)
    assert pod["metadata"] == {
        "name": "c-0",
        "labels": {CLUSTER_LABEL: "c", "team": "ml"},
        "annotations": {"owner": "me"},
    }
    assert pod["spec"]["tolerations"] == [{"key": "ours"}, *POD_CONFIG["spec"]["tolerations"]]  # type: ignore[index]
    (container,) = pod["spec"]["containers"]
    assert container["name"] == "node" and container["command"] == ["sleep"]
    assert container["resources"]["limits"] == {"cpu": "2", "ephemeral-storage": "10Gi"}
    assert container["securityContext"] == {"capabilities": {"add": ["IPC_LOCK"]}}
    assert container["env"] == [{"name": "NCCL_DEBUG", "value": "INFO"}]


@pytest.fixture
def provider(fake_kubernetes: FakeKubernetes) -> Iterator[KubernetesProvider]:
    with use_kubeconfig(fake_kubernetes.kubeconfig()):
        yield KubernetesProvider()


def test_the_pods_the_fake_cluster_receives_carry_the_tasks_pod_config(
    fake_kubernetes: FakeKubernetes, provider: KubernetesProvider
) -> None:
    cluster = unique_cluster("kpodcfg")
    offering = next(
        o
        for o in read_offerings(kubeconfig=str(fake_kubernetes.kubeconfig()))
        if o.instance_type == "4CPU--16GB"
    )
    request = ProvisionRequest(
        cluster_name=cluster, offering=offering, overrides=ProviderOverrides(kubernetes=OVERRIDES)
    )
    handle = run(provider.launch(request))
    (pod,) = [p for p in fake_kubernetes.pods() if p["metadata"]["labels"].get(CLUSTER_LABEL) == cluster]  # type: ignore[index, union-attr]
    assert pod["metadata"]["labels"]["team"] == "ml"  # type: ignore[index]
    assert pod["metadata"]["annotations"]["owner"] == "me"  # type: ignore[index]
    assert POD_CONFIG["spec"]["tolerations"][0] in pod["spec"]["tolerations"]  # type: ignore[index]
    container = pod["spec"]["containers"][0]  # type: ignore[index]
    assert container["securityContext"] == {"capabilities": {"add": ["IPC_LOCK"]}}
    assert container["command"] == ["sleep", "infinity"]
    run(provider.terminate(handle))


def test_disk_size_is_the_pods_ephemeral_storage_request_and_too_much_is_a_capacity_error(
    fake_kubernetes: FakeKubernetes, provider: KubernetesProvider
) -> None:
    from skyhop.optimizer.capabilities import shortfall
    from skyhop.providers.base import Needs
    from skyhop.providers.errors import CapacityError

    assert shortfall("kubernetes", Needs(disk_size=True)) is None  # no longer left out of the plan
    offering = next(
        o
        for o in read_offerings(kubeconfig=str(fake_kubernetes.kubeconfig()))
        if o.instance_type == "4CPU--16GB"
    )
    cluster = unique_cluster("kdisk")
    handle = run(provider.launch(ProvisionRequest(cluster_name=cluster, offering=offering, disk_size=50)))
    (pod,) = [p for p in fake_kubernetes.pods() if p["metadata"]["labels"].get(CLUSTER_LABEL) == cluster]  # type: ignore[index, union-attr]
    resources = pod["spec"]["containers"][0]["resources"]  # type: ignore[index]
    assert resources["requests"]["ephemeral-storage"] == "50Gi"
    assert "ephemeral-storage" not in resources["limits"]
    run(provider.terminate(handle))
    huge = ProvisionRequest(cluster_name=unique_cluster("kdisk"), offering=offering, disk_size=4096)
    with pytest.raises(CapacityError, match="unschedulable"):
        run(provider.launch(huge))


def test_a_priority_class_is_the_pods_and_pins_the_task_to_kubernetes(
    fake_kubernetes: FakeKubernetes, provider: KubernetesProvider
) -> None:
    """SkyPilot's ``resources.priority_class``: the pods' ``priorityClassName``; no other provider
    has one, so a task that asks for it plans on Kubernetes only."""
    from skyhop.optimizer.capabilities import left_out
    from skyhop.spec import Task

    task = Task.model_validate({"run": "x", "resources": {"priority_class": "batch-low"}})
    assert left_out(task, ["aws", "kubernetes"]) == {
        "aws": "aws does not support priority classes (a Kubernetes PriorityClass)"
    }
    offering = next(
        o
        for o in read_offerings(kubeconfig=str(fake_kubernetes.kubeconfig()))
        if o.instance_type == "4CPU--16GB"
    )
    cluster = unique_cluster("kprio")
    handle = run(
        provider.launch(ProvisionRequest(cluster_name=cluster, offering=offering, priority_class="batch-low"))
    )
    (pod,) = [p for p in fake_kubernetes.pods() if p["metadata"]["labels"].get(CLUSTER_LABEL) == cluster]  # type: ignore[index, union-attr]
    assert pod["spec"]["priorityClassName"] == "batch-low"  # type: ignore[index]
    run(provider.terminate(handle))


def test_docker_run_options_become_the_parts_of_the_pod_they_amount_to() -> None:
    """SkyPilot's verl examples run on Kubernetes with ``--cap-add=SYS_PTRACE --ipc=host
    --shm-size=16g``: on a pod those are a capability, the host's IPC namespace and a memory-backed
    /dev/shm; an option with no pod equivalent is named, never dropped."""
    from skyhop.providers.pod_run_options import pod_options

    options = pod_options(
        ["--cap-add=SYS_PTRACE", "--ipc=host", "--shm-size", "16g", "-e", "A=1", "--gpus", "all"]
    )
    assert options.unsupported is None
    ours = {"spec": {"containers": [{"name": "node", "command": ["sleep", "infinity"]}]}}
    pod = merge_pod_config(
        ours, KubernetesOverrides(), ["--cap-add=SYS_PTRACE", "--ipc=host", "--shm-size=16g"]
    )
    assert pod["spec"]["hostIPC"] is True
    assert pod["spec"]["volumes"] == [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}}]
    (container,) = pod["spec"]["containers"]
    assert container["securityContext"] == {"capabilities": {"add": ["SYS_PTRACE"]}}
    assert container["volumeMounts"] == [{"name": "dshm", "mountPath": "/dev/shm"}]
    assert container["name"] == "node" and container["command"] == ["sleep", "infinity"]
    assert pod_options(["--ipc=private"]).unsupported == "--ipc private"
    assert pod_options(["-v", "/data:/data"]).unsupported == "-v"
