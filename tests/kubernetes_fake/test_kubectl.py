"""The machine's ``kubectl``, unchanged, against the fake: discovery, tables, exec, delete with wait."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.fakes.kubernetes import FakeKubernetes
from tests.fakes.kubernetes.fixture import core_api, pod_manifest
from tests.helpers import wait_for

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")


def kubectl(fake: FakeKubernetes, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    assert KUBECTL is not None
    argv = [KUBECTL, "--kubeconfig", str(fake.kubeconfig()), *args]
    return subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=60)


def test_get_nodes_and_pods(fake_kubernetes: FakeKubernetes) -> None:
    nodes = kubectl(fake_kubernetes, "get", "nodes")
    assert nodes.returncode == 0, nodes.stderr
    assert nodes.stdout.split("\n")[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert {line.split()[0]: line.split()[1] for line in nodes.stdout.strip().split("\n")[1:]} == {
        "cpu-1": "Ready", "gpu-a100": "Ready", "gpu-t4": "Ready"}  # fmt: skip
    core_api(fake_kubernetes).create_namespaced_pod("default", pod_manifest("listed", ["sleep", "600"]))
    pod = fake_kubernetes.wait_pod("listed", "Running")
    wide = kubectl(fake_kubernetes, "get", "pods", "-o", "wide")
    assert wide.returncode == 0, wide.stderr
    row = next(line.split() for line in wide.stdout.split("\n") if line.startswith("listed "))
    assert row[1:4] == ["1/1", "Running", "0"] and row[5:7] == [
        pod["status"]["podIP"],
        pod["spec"]["nodeName"],
    ]
    as_json = kubectl(fake_kubernetes, "get", "pod", "listed", "-o", "jsonpath={.status.phase}")
    assert as_json.stdout == "Running"


def test_exec_and_delete(fake_kubernetes: FakeKubernetes) -> None:
    core_api(fake_kubernetes).create_namespaced_pod("default", pod_manifest("target", ["sleep", "600"]))
    fake_kubernetes.wait_pod("target", "Running")
    hi = kubectl(fake_kubernetes, "exec", "target", "--", "echo", "hi")
    assert (hi.returncode, hi.stdout) == (0, "hi\n"), hi.stderr
    piped = kubectl(
        fake_kubernetes, "exec", "-i", "target", "--", "sh", "-c", "cat; exit 4", stdin="through stdin\n"
    )
    assert (piped.returncode, piped.stdout) == (4, "through stdin\n"), piped.stderr
    deleted = kubectl(fake_kubernetes, "delete", "pod", "target")
    assert (deleted.returncode, deleted.stdout) == (0, 'pod "target" deleted\n'), deleted.stderr
    assert fake_kubernetes.pod("target") is None
    missing = kubectl(fake_kubernetes, "get", "pod", "target")
    assert missing.returncode == 1 and 'pods "target" not found' in missing.stderr


def test_logs(fake_kubernetes: FakeKubernetes) -> None:
    talker = ["sh", "-c", "echo one; echo two; echo three >&2; sleep 600"]
    core_api(fake_kubernetes).create_namespaced_pod("default", pod_manifest("talker", talker))
    fake_kubernetes.wait_pod("talker", "Running")

    def logs(*args: str) -> str:
        return kubectl(fake_kubernetes, "logs", "talker", *args).stdout

    wait_for(lambda: logs().count("\n") == 3, 10, "three lines of log")
    assert sorted(logs().split()) == ["one", "three", "two"]
    assert len(logs("--tail=1").split()) == 1
    kubectl(fake_kubernetes, "delete", "pod", "talker", "--grace-period=0", "--force")


def test_cp_both_ways_and_other_tables(fake_kubernetes: FakeKubernetes, tmp_path: Path) -> None:
    api = core_api(fake_kubernetes)
    api.create_namespaced_pod("default", pod_manifest("box", ["sleep", "600"]))
    api.create_namespaced_service("default", {"metadata": {"name": "web"}, "spec": {"ports": [{"port": 80}]}})
    fake_kubernetes.wait_pod("box", "Running")
    (tmp_path / "up.txt").write_text("over tar\n")
    sent = kubectl(fake_kubernetes, "cp", str(tmp_path / "up.txt"), "box:up.txt")
    assert sent.returncode == 0, sent.stderr
    back = kubectl(fake_kubernetes, "cp", "box:up.txt", str(tmp_path / "back.txt"))
    assert back.returncode == 0 and (tmp_path / "back.txt").read_text() == "over tar\n", back.stderr
    services = kubectl(fake_kubernetes, "get", "svc", "web").stdout.split("\n")
    assert services[0].split() == ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"]
    assert services[1].split()[:2] == ["web", "ClusterIP"] and services[1].split()[4] == "80/TCP"
    described = kubectl(fake_kubernetes, "describe", "pod", "box").stdout
    assert "Successfully assigned default/box to" in described
    api.delete_namespaced_pod("box", "default", grace_period_seconds=0)
    api.delete_namespaced_service("web", "default")


def test_one_kubeconfig_for_two_clusters(tmp_path: Path) -> None:
    from kubernetes import client, config

    from tests.fakes.kubernetes import NodeSpec, write_kubeconfig
    from tests.fakes.kubernetes.fixture import running_fake

    for east in running_fake(tmp_path / "east", [NodeSpec("east-1")], context="east"):
        for west in running_fake(tmp_path / "west", [NodeSpec("west-1")], context="west"):
            both = write_kubeconfig(tmp_path / "kubeconfig", [east, west])
            assert KUBECTL is not None
            argv = [KUBECTL, "--kubeconfig", str(both), "--context", "west", "get", "nodes", "-o", "name"]
            assert subprocess.run(argv, capture_output=True, text=True, timeout=60).stdout == "node/west-1\n"
            api = client.CoreV1Api(config.new_client_from_config(str(both)))  # the current context: east
            assert [n.metadata.name for n in api.list_node().items] == ["east-1"]
            api.create_namespaced_pod("default", pod_manifest("counted", ["true"]))
            assert east.writes() == ["POST /api/v1/namespaces/default/pods"] and west.writes() == []


def test_get_watch_prints_each_change_as_a_row(fake_kubernetes: FakeKubernetes, tmp_path: Path) -> None:
    assert KUBECTL is not None
    out = tmp_path / "watch.txt"
    argv = [
        KUBECTL,
        "--kubeconfig",
        str(fake_kubernetes.kubeconfig()),
        "get",
        "pods",
        "-w",
        "-l",
        "t=watched",
    ]
    with open(out, "w") as sink:
        watcher = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT)
    try:
        assert fake_kubernetes.api is not None
        calls = fake_kubernetes.api.calls
        mine = {"watch": "true", "labelSelector": "t=watched"}
        wait_for(lambda: any(mine.items() <= c.query.items() for c in calls), 20, "kubectl to watch")
        manifest = pod_manifest("watched", ["sleep", "1"], labels={"t": "watched"})
        core_api(fake_kubernetes).create_namespaced_pod("default", manifest)
        wait_for(lambda: "Completed" in out.read_text(), 30, "the pod's rows")
    finally:
        watcher.terminate()
        watcher.wait()
    statuses = [line.split()[2] for line in out.read_text().split("\n") if line.startswith("watched ")]
    assert statuses[0] == "Pending" and "Running" in statuses and statuses[-1] == "Completed"
    core_api(fake_kubernetes).delete_namespaced_pod("watched", "default")
