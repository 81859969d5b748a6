"""``skyhop launch --infra k8s`` end to end: the CLI, the session worker and fake clusters."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import skyhop
from tests.fakes.kubernetes import FakeKubernetes, NodeSpec, write_kubeconfig
from tests.fakes.kubernetes.fixture import A100, running_fake
from tests.helpers import WorkerProcess
from tests.integration.support import unique_cluster
from tests.kubernetes.conftest import use_kubeconfig


def _pods(fake: FakeKubernetes, cluster: str) -> list[dict[str, object]]:
    return [
        p for p in fake.pods() if (p["metadata"].get("labels") or {}).get("skyhop.dev/cluster") == cluster
    ]


def test_one_node_launch_runs_the_task_in_a_pod_and_down_leaves_none(
    fake_kubernetes: FakeKubernetes, cli_env: dict[str, str], live_worker: WorkerProcess
) -> None:
    cluster = unique_cluster("k1")
    with use_kubeconfig(fake_kubernetes.kubeconfig()):
        launched = skyhop(
            "launch", "-y", "-c", cluster, "--infra", "k8s", "echo hello-$SKYHOP_NODE_RANK", env=cli_env
        )
        assert launched.returncode == 0, launched.stdout + launched.stderr
        assert "hello-0" in launched.stdout
        (pod,) = _pods(fake_kubernetes, cluster)
        assert pod["status"]["phase"] == "Running"  # type: ignore[index]
        down = skyhop("down", "-y", cluster, env=cli_env)
        assert down.returncode == 0, down.stdout + down.stderr
        assert _pods(fake_kubernetes, cluster) == []


def test_a_two_node_gpu_task_fails_over_from_a_context_that_cannot_hold_the_gang(
    tmp_path: Path, cli_env: dict[str, str], live_worker: WorkerProcess
) -> None:
    a100 = {"nvidia.com/gpu.product": A100}
    small = [NodeSpec("a100-1", cpu="8", memory="64Gi", gpus=2, labels=a100)]
    big = [NodeSpec(f"a100-{i}", cpu="8", memory="64Gi", gpus=2, labels=a100) for i in (1, 2)]
    cluster = unique_cluster("k2")
    for first in running_fake(tmp_path / "a", small, context="a-small"):
        for second in running_fake(tmp_path / "b", big, context="b-big"):
            kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", [first, second])
            with use_kubeconfig(kubeconfig, allowed_contexts=["a-small", "b-big"]):
                script = 'echo "rank=$SKYHOP_NODE_RANK of $SKYHOP_NUM_NODES ips=$(echo $SKYHOP_NODE_IPS)"'
                launched = skyhop(
                    "launch", "-y", "-c", cluster, "--infra", "k8s", "--gpus", "A100-80GB:2",
                    "--num-nodes", "2", script, env=cli_env,
                )  # fmt: skip
                output = launched.stdout + launched.stderr
                assert launched.returncode == 0, output
                assert "a-small" in output and "capacity" in output, output  # the failover is shown
                assert _pods(first, cluster) == []
                pods = sorted(_pods(second, cluster), key=lambda p: p["metadata"]["name"])  # type: ignore[index]
                ips = " ".join(p["status"]["podIP"] for p in pods)  # type: ignore[index]
                for rank in (0, 1):
                    assert f"rank={rank} of 2 ips={ips}" in output, output
                assert {p["spec"]["nodeName"] for p in pods} == {"a100-1", "a100-2"}  # type: ignore[index]
                down = skyhop("down", "-y", cluster, env=cli_env)
                assert down.returncode == 0, down.stdout + down.stderr
                assert _pods(second, cluster) == []
