"""The provider against the fake cluster: pods as nodes, gang admission, idempotence, teardown."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from skyhop.contract import JobStatus
from skyhop.providers.base import NodeRequest, ProvisionRequest
from skyhop.providers.errors import CapacityError, InvalidRequestError
from skyhop.providers.kubernetes.offerings import read_offerings
from skyhop.providers.kubernetes.pods import cluster_selector
from skyhop.providers.kubernetes.provider import KubernetesProvider
from skyhop.providers.runtime.errors import NodeGoneError
from skyhop.providers.runtime.jobs import JobSpec
from skyhop.spec import Resources, Task
from tests.conftest import run
from tests.fakes.kubernetes import FakeKubernetes
from tests.fakes.kubernetes.fixture import core_api
from tests.helpers import DevServer, WorkerProcess, wait_for
from tests.integration.support import client_for, launched, record, unique_cluster, until_job_done
from tests.kubernetes.conftest import use_kubeconfig


@pytest.fixture
def provider(fake_kubernetes: FakeKubernetes) -> Iterator[KubernetesProvider]:
    with use_kubeconfig(fake_kubernetes.kubeconfig()):
        yield KubernetesProvider()


def _ours(fake: FakeKubernetes, cluster: str) -> list[dict[str, object]]:
    label = cluster_selector(cluster).split("=")
    return [p for p in fake.pods() if (p["metadata"].get("labels") or {}).get(label[0]) == label[1]]


def _request(
    fake: FakeKubernetes, cluster: str, shape: str, nodes: int = 1, **extra: object
) -> ProvisionRequest:
    offering = next(o for o in read_offerings(kubeconfig=str(fake.kubeconfig())) if o.instance_type == shape)
    return ProvisionRequest(cluster_name=cluster, offering=offering, num_nodes=nodes, **extra)


def test_a_gpu_node_is_a_pod_with_its_gpus_that_runs_jobs_and_a_retry_makes_no_second(
    fake_kubernetes: FakeKubernetes, provider: KubernetesProvider
) -> None:
    cluster = unique_cluster("kgpu")
    labels = {"team": "ml", "skyhop.dev/cluster": "not-this"}  # resources.labels; skyhop's own win
    request = _request(fake_kubernetes, cluster, "4CPU--16GB--T4:1", labels=labels)
    handle = run(provider.launch(request))
    (pod,) = _ours(fake_kubernetes, cluster)
    assert pod["metadata"]["labels"]["team"] == "ml"  # type: ignore[index]
    container = pod["spec"]["containers"][0]  # type: ignore[index]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert container["resources"]["requests"] == {"cpu": "4000m", "memory": "16384Mi", "nvidia.com/gpu": "1"}
    terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]  # type: ignore[index]
    assert terms["nodeSelectorTerms"] == [
        {
            "matchExpressions": [
                {"key": "cloud.google.com/gke-accelerator", "operator": "In", "values": ["nvidia-tesla-t4"]}
            ]
        }
    ]
    assert pod["spec"]["nodeName"] == "gpu-t4"  # type: ignore[index]
    assert handle.head.ip == pod["status"]["podIP"]  # type: ignore[index]

    writes = len(fake_kubernetes.writes())
    again = run(provider.launch(request))  # a retried activity: finds the pod by label
    assert again.nodes == handle.nodes
    assert [w for w in fake_kubernetes.writes()[writes:] if w.startswith("POST")] == []
    assert len(_ours(fake_kubernetes, cluster)) == 1

    runtime = provider.runtime(handle.head)
    run(runtime.start_job(JobSpec(key="j1", script="nvidia-smi; echo rank-ok")))
    wait_for(lambda: (s := run(runtime.job_state("j1"))) is not None and s.done, 20, "the job to end")
    assert b"rank-ok" in run(runtime.read_log("j1", 0))
    assert run(provider.node_statuses(handle))[0].value == "UP"

    run(provider.terminate(handle))
    assert _ours(fake_kubernetes, cluster) == []
    assert run(provider.node_statuses(handle))[0].value == "TERMINATED"


def test_two_one_gpu_tasks_share_a_two_gpu_node_with_the_defaults_beside_a_gpu(
    fake_kubernetes: FakeKubernetes, provider: KubernetesProvider
) -> None:
    one_gpu = NodeRequest(accelerators={"A100-80GB": 1})  # cpus and memory left open
    clusters = [unique_cluster("kshare") for _ in range(2)]
    requests = [
        _request(fake_kubernetes, c, "8CPU--64GB--A100-80GB:2", node_request=one_gpu) for c in clusters
    ]
    handles = [run(provider.launch(r)) for r in requests]
    pods = [pod for c in clusters for pod in _ours(fake_kubernetes, c)]
    assert [p["spec"]["nodeName"] for p in pods] == ["gpu-a100", "gpu-a100"]  # type: ignore[index]
    for pod in pods:
        resources = pod["spec"]["containers"][0]["resources"]  # type: ignore[index]
        assert resources["requests"] == {"cpu": "4000m", "memory": "16384Mi", "nvidia.com/gpu": "1"}
    for handle in handles:
        run(provider.terminate(handle))


def test_the_tasks_docker_image_is_the_pods_and_an_unpullable_one_is_named(
    fake_kubernetes: FakeKubernetes, provider: KubernetesProvider
) -> None:
    cluster = unique_cluster("kimage")
    handle = run(
        provider.launch(_request(fake_kubernetes, cluster, "4CPU--16GB", container_image="ubuntu:24.04"))
    )
    (pod,) = _ours(fake_kubernetes, cluster)
    assert pod["spec"]["containers"][0]["image"] == "ubuntu:24.04"  # type: ignore[index]
    run(provider.terminate(handle))
    # A plain image_id is the pod's image too, as SkyPilot reads it on Kubernetes.
    plain = unique_cluster("kplain")
    handle = run(provider.launch(_request(fake_kubernetes, plain, "4CPU--16GB", image_id="ubuntu:22.04")))
    (pod,) = _ours(fake_kubernetes, plain)
    assert pod["spec"]["containers"][0]["image"] == "ubuntu:22.04"  # type: ignore[index]
    run(provider.terminate(handle))

    fake_kubernetes.fail_image_pull("skyhop-test/missing:1")
    missing = _request(
        fake_kubernetes, unique_cluster("kpull"), "4CPU--16GB", container_image="skyhop-test/missing:1"
    )
    with pytest.raises(InvalidRequestError) as refused:
        run(provider.launch(missing))
    assert "image 'skyhop-test/missing:1' cannot be pulled" in refused.value.message
    wait_for(lambda: not _ours(fake_kubernetes, missing.cluster_name), 20, "the pod to go")


def test_a_gang_that_cannot_all_be_scheduled_is_deleted_at_once(
    fake_kubernetes: FakeKubernetes, provider: KubernetesProvider
) -> None:
    cluster = unique_cluster("kgang")
    request = _request(fake_kubernetes, cluster, "8CPU--64GB--A100-80GB:2", nodes=2)  # one such node
    started = time.monotonic()
    with pytest.raises(CapacityError) as refused:
        run(provider.launch(request))
    assert time.monotonic() - started < 3
    assert refused.value.code == "FailedScheduling"
    assert "1 of 2 pod(s) unschedulable" in refused.value.message
    wait_for(lambda: not _ours(fake_kubernetes, cluster), 20, "the gang's pods to go")


def test_an_evicted_pod_reads_as_taken_back(
    fake_kubernetes: FakeKubernetes, provider: KubernetesProvider
) -> None:
    cluster = unique_cluster("kevict")
    handle = run(provider.launch(_request(fake_kubernetes, cluster, "4CPU--16GB")))
    fake_kubernetes.evict(handle.head.instance_id)
    wait_for(lambda: run(provider.node_statuses(handle))[0].value == "PREEMPTED", 20, "the eviction")
    run(provider.terminate(handle))
    assert _ours(fake_kubernetes, cluster) == []


@pytest.mark.parametrize(("end", "reason"), [("evict", "Evicted"), ("oom_kill", "OOMKilled")])
def test_a_pod_that_ends_under_its_job_is_gone_with_the_pods_reason(
    fake_kubernetes: FakeKubernetes, provider: KubernetesProvider, end: str, reason: str
) -> None:
    cluster = unique_cluster("kend")
    handle = run(provider.launch(_request(fake_kubernetes, cluster, "4CPU--16GB")))
    runtime = provider.runtime(handle.head)
    run(runtime.start_job(JobSpec(key="j1", script="sleep 600")))
    getattr(fake_kubernetes, end)(handle.head.instance_id)

    def answered() -> bool:
        try:
            run(runtime.job_state("j1"))
        except NodeGoneError:
            raise
        except OSError:
            pass  # an exec killed with the container, before the pod's status says it ended
        return False

    with pytest.raises(NodeGoneError) as gone:
        wait_for(answered, 20, "the pod to end")
    assert f"ended: {reason}" in str(gone.value)
    run(provider.terminate(handle))


def test_an_eviction_mid_job_fails_the_docker_image_job_saying_evicted(
    fake_kubernetes: FakeKubernetes, temporal_server: DevServer, live_worker: WorkerProcess
) -> None:
    cluster = unique_cluster("kjob")
    resources = Resources(infra="k8s", docker_image="ubuntu:24.04")
    task = Task(run="echo up; sleep 300", resources=resources)

    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        async with launched(client, cluster, task) as result:
            (pod,) = _ours(fake_kubernetes, cluster)  # the task's image, and no docker run inside it
            assert pod["spec"]["containers"][0]["image"] == "ubuntu:24.04"  # type: ignore[index]
            runtime = KubernetesProvider().runtime(result.handle.head)
            await asyncio.to_thread(
                wait_for, lambda: run(runtime.read_log("job-1", 0)) == b"up\n", 30, "the job"
            )
            fake_kubernetes.evict(result.handle.head.instance_id)
            await until_job_done(temporal_server.address, cluster, 60, "the job to fail")
            job = (await record(client, cluster)).jobs[0]
            assert job.status == JobStatus.FAILED
            assert job.error is not None and "is gone" in job.error and "ended: Evicted" in job.error

    with use_kubeconfig(fake_kubernetes.kubeconfig()):
        run(scenario())
    assert _ours(fake_kubernetes, cluster) == []


def test_ports_are_a_service_in_front_of_the_head_pod_and_down_deletes_it(
    fake_kubernetes: FakeKubernetes, provider: KubernetesProvider
) -> None:
    cluster = unique_cluster("kport")
    request = _request(fake_kubernetes, cluster, "4CPU--16GB", ports=["8080", "9000-9001"])
    handle = run(provider.launch(request))
    run(provider.launch(request))  # a retried activity: the Service is there already
    api = core_api(fake_kubernetes)
    selector = cluster_selector(cluster)
    (service,) = api.list_namespaced_service("default", label_selector=selector).items
    assert service.spec.selector == {"skyhop.dev/cluster": cluster, "skyhop.dev/rank": "0"}
    assert [p.port for p in service.spec.ports] == [8080, 9000, 9001]
    run(provider.open_ports(handle, ["7000"]))
    (service,) = api.list_namespaced_service("default", label_selector=selector).items
    assert [p.port for p in service.spec.ports] == [7000, 8080, 9000, 9001]
    run(provider.terminate(handle))
    assert api.list_namespaced_service("default", label_selector=selector).items == []


def test_check_says_which_contexts_answer(fake_kubernetes: FakeKubernetes) -> None:
    with use_kubeconfig(fake_kubernetes.kubeconfig(), allowed_contexts=["fake", "gone"]):
        result = run(KubernetesProvider().check())
    assert result.enabled
    assert result.reason.startswith("contexts: fake: reachable; gone: ")
    assert "has no context 'gone'" in result.reason
