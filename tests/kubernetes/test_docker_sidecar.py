"""``config.kubernetes.enable_docker``: a Docker-in-Docker or BuildKit sidecar in each pod, as SkyPilot's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from skyhop.cli.app import app
from skyhop.providers.base import ProvisionRequest
from skyhop.providers.kubernetes.docker_sidecar import BUILDKIT_IMAGE, DIND_IMAGE, with_docker
from skyhop.providers.kubernetes.offerings import read_offerings
from skyhop.providers.kubernetes.pods import CLUSTER_LABEL
from skyhop.providers.kubernetes.provider import KubernetesProvider
from skyhop.providers.overrides import DockerInPod, DockerMode, KubernetesOverrides, ProviderOverrides
from tests.conftest import run
from tests.fakes.kubernetes import FakeKubernetes
from tests.integration.support import unique_cluster
from tests.kubernetes.conftest import use_kubeconfig

POD: dict[str, Any] = {
    "metadata": {"name": "c-0"},
    "spec": {
        "containers": [
            {"name": "node", "image": "ubuntu", "env": [{"name": "A", "value": "1"}]},
            {"name": "tasks-own", "image": "busybox"},
        ],
        "volumes": [{"name": "volume-0", "persistentVolumeClaim": {"claimName": "data"}}],
    },
}


def _by_name(items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {item["name"]: item for item in items}


def test_all_is_a_privileged_dind_sidecar_whose_socket_the_node_shares() -> None:
    pod = with_docker(POD, DockerInPod(mode=DockerMode.ALL))
    node, tasks_own, docker = pod["spec"]["containers"]
    assert tasks_own == POD["spec"]["containers"][1]
    assert docker["image"] == DIND_IMAGE and docker["securityContext"] == {"privileged": True}
    assert "command" not in docker and "args" not in docker  # the image's dind entrypoint
    assert node["env"] == [
        {"name": "A", "value": "1"},
        {"name": "DOCKER_HOST", "value": "unix:///var/run/skyhop-docker/docker.sock"},
    ]
    assert {"name": "docker-socket", "mountPath": "/var/run/skyhop-docker"} in node["volumeMounts"]
    assert docker["volumeMounts"] == [
        {"name": "docker-socket", "mountPath": "/var/run"},
        {"name": "docker-data", "mountPath": "/var/lib/docker"},
    ]
    volumes = _by_name(pod["spec"]["volumes"])
    assert volumes["volume-0"] == POD["spec"]["volumes"][0]
    assert volumes["docker-socket"]["emptyDir"] == {} and volumes["docker-data"]["emptyDir"] == {}
    assert len(POD["spec"]["containers"]) == 2  # the manifest given is left as it was


def test_build_is_a_rootless_buildkit_sidecar_without_privileges() -> None:
    pod = with_docker(POD, DockerInPod(mode=DockerMode.BUILD))
    node, _, buildkit = pod["spec"]["containers"]
    assert buildkit["image"] == BUILDKIT_IMAGE
    assert "privileged" not in buildkit["securityContext"]
    assert buildkit["securityContext"]["runAsUser"] == 1000
    assert buildkit["securityContext"]["seccompProfile"] == {"type": "Unconfined"}
    assert "--oci-worker-no-process-sandbox" in buildkit["args"]
    assert "unix:///srv/buildkit/buildkitd.sock" in buildkit["args"]
    assert node["env"][-1] == {
        "name": "BUILDKIT_HOST",
        "value": "unix:///var/run/skyhop-docker/buildkitd.sock",
    }
    assert not any(e["name"] == "DOCKER_HOST" for e in node["env"])
    assert buildkit["volumeMounts"][1]["mountPath"] == "/home/user/.local/share/buildkit"


@pytest.mark.parametrize("mode", list(DockerMode))
def test_a_cache_volume_is_the_daemons_data_in_a_folder_of_the_pods_own(mode: DockerMode) -> None:
    pod = with_docker(POD, DockerInPod(mode=mode, cache_volume="builder-cache"))
    sidecar = pod["spec"]["containers"][-1]
    data = _by_name(sidecar["volumeMounts"])["docker-data"]
    assert data["subPath"] == "c-0"
    assert _by_name(pod["spec"]["volumes"])["docker-data"] == {
        "name": "docker-data",
        "persistentVolumeClaim": {"claimName": "builder-cache"},
    }


@pytest.fixture
def provider(fake_kubernetes: FakeKubernetes) -> Iterator[KubernetesProvider]:
    with use_kubeconfig(fake_kubernetes.kubeconfig()):
        yield KubernetesProvider()


def test_a_pod_with_a_dind_sidecar_launches_and_the_task_sees_docker_host(
    fake_kubernetes: FakeKubernetes, provider: KubernetesProvider
) -> None:
    """The fake runs ``sleep infinity`` for the daemon (``kubelet._DAEMON_IMAGES``): the pod is Ready
    with both containers running, and skyhop's commands go to the node container, not the sidecar."""
    offering = next(
        o
        for o in read_offerings(kubeconfig=str(fake_kubernetes.kubeconfig()))
        if o.instance_type == "4CPU--16GB"
    )
    overrides = ProviderOverrides(kubernetes=KubernetesOverrides(enable_docker=True))  # type: ignore[arg-type]
    cluster = unique_cluster("kdind")
    handle = run(
        provider.launch(ProvisionRequest(cluster_name=cluster, offering=offering, overrides=overrides))
    )
    (pod,) = [p for p in fake_kubernetes.pods() if p["metadata"]["labels"].get(CLUSTER_LABEL) == cluster]  # type: ignore[index, union-attr]
    names = [c["name"] for c in pod["spec"]["containers"]]  # type: ignore[index]
    assert names == ["node", "docker"]
    assert pod["spec"]["containers"][1]["securityContext"] == {"privileged": True}  # type: ignore[index]
    assert all(s["ready"] for s in pod["status"]["containerStatuses"])  # type: ignore[index]
    (node,) = handle.nodes
    result = run(provider.runtime(node).run('printf %s "$DOCKER_HOST"'))
    assert result.stdout == b"unix:///var/run/skyhop-docker/docker.sock"
    run(provider.terminate(handle))


def _dryrun(tmp_path: Path, kubernetes: dict[str, Any]) -> dict[str, Any]:
    """``skyhop launch --dryrun --json`` of SkyPilot's examples/enable_docker shape, in process."""
    task = {
        "resources": {"cpus": "2+", "infra": "kubernetes"},
        "run": "docker info",
        "config": {"kubernetes": kubernetes},
    }
    path = tmp_path / "task.yaml"
    path.write_text(yaml.safe_dump(task))
    result = CliRunner().invoke(app, ["launch", str(path), "--dryrun", "--json"])
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.output)["items"][0])


@pytest.mark.parametrize(
    ("kubernetes", "shown"),
    [
        ({"enable_docker": True}, {"mode": "all"}),
        ({"enable_docker": "BUILD"}, {"mode": "build"}),
        (
            {"enable_docker": {"enabled": True, "cache_volume": "my-builder-cache"}},
            {"mode": "all", "cache_volume": "my-builder-cache"},
        ),
        ({"image_builder": {"mode": "build", "cache_volume": "c"}}, {"mode": "build", "cache_volume": "c"}),
        ({"container_tools": "all"}, {"mode": "all"}),
        # SkyPilot's earlier examples (examples/image_builder, examples/container_tools):
        ({"image_builder": {"type": "buildkit"}}, {"mode": "build"}),
        (
            {"container_tools": {"type": "dind", "volume": "my-cache"}},
            {"mode": "all", "cache_volume": "my-cache"},
        ),
    ],
)
def test_skypilots_enable_docker_example_plans_on_kubernetes_with_the_setting_shown(
    tmp_path: Path, fake_kubernetes: FakeKubernetes, kubernetes: dict[str, Any], shown: dict[str, str]
) -> None:
    with use_kubeconfig(fake_kubernetes.kubeconfig()):
        item = _dryrun(tmp_path, kubernetes)
    assert item["provider"] == "kubernetes"
    assert item["config"] == {"kubernetes": {"enable_docker": shown}}


@pytest.mark.parametrize("setting", [None, True, "build", {"mode": "all", "cache_volume": "cache"}])
def test_the_setting_survives_a_workflow_payload(setting: object) -> None:
    """A provision request travels as JSON between workflow and activity: ``enable_docker: null``
    (no sidecar, every other launch) must read back, or no Kubernetes launch could start."""
    from skyhop.providers.overrides import KubernetesOverrides, ProviderOverrides

    overrides = ProviderOverrides(kubernetes=KubernetesOverrides(enable_docker=setting))
    assert ProviderOverrides.model_validate_json(overrides.model_dump_json()) == overrides
