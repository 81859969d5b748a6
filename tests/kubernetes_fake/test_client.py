"""The ``kubernetes`` Python client, unchanged, against the fake: CRUD, errors, selectors, watch, exec."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.kubernetes import FakeKubernetes
from tests.fakes.kubernetes.fixture import A100, core_api, pod_manifest
from tests.helpers import wait_for


def _running(api: Any, name: str) -> Any:
    def up() -> bool:
        return bool(api.read_namespaced_pod(name, "default").status.phase == "Running")

    wait_for(up, 30, f"pod {name} to run")
    return api.read_namespaced_pod(name, "default")


def _exec(api: Any, name: str, command: list[str], stdin: bytes | None = None) -> tuple[str, int]:
    from kubernetes.stream import stream

    flags = {"stdin": stdin is not None, "stdout": True, "stderr": True, "tty": False}
    call = api.connect_get_namespaced_pod_exec
    session = stream(call, name, "default", command=command, _preload_content=False, binary=True, **flags)
    if stdin is not None:
        session.write_stdin(stdin)
        session.close_channel(0)
    session.run_forever(timeout=30)
    return session.read_stdout().decode(), session.returncode


def test_nodes_show_labels_and_allocatable(fake_kubernetes: FakeKubernetes) -> None:
    api = core_api(fake_kubernetes)
    nodes = {n.metadata.name: n for n in api.list_node().items}
    assert nodes["gpu-a100"].status.allocatable["nvidia.com/gpu"] == "2"
    assert nodes["gpu-a100"].metadata.labels["nvidia.com/gpu.product"] == A100
    assert nodes["cpu-1"].status.allocatable["cpu"] == "4"
    assert {c.type: c.status for c in nodes["cpu-1"].status.conditions}["Ready"] == "True"
    assert [n.metadata.name for n in api.list_node(label_selector="nvidia.com/gpu.product").items] == [
        "gpu-a100"
    ]


def test_pod_crud_and_status_errors(fake_kubernetes: FakeKubernetes) -> None:
    from kubernetes.client.rest import ApiException

    api = core_api(fake_kubernetes)
    created = api.create_namespaced_pod(
        "default", pod_manifest("crud", ["sleep", "600"], labels={"t": "crud"})
    )
    assert created.metadata.uid and created.metadata.resource_version and created.status.phase == "Pending"
    with pytest.raises(ApiException) as duplicate:
        api.create_namespaced_pod("default", pod_manifest("crud", ["sleep", "600"]))
    assert duplicate.value.status == 409 and json.loads(duplicate.value.body)["reason"] == "AlreadyExists"
    pod = _running(api, "crud")
    assert pod.status.pod_ip and pod.spec.node_name and pod.status.container_statuses[0].state.running
    assert [p.metadata.name for p in api.list_namespaced_pod("default", label_selector="t=crud").items] == [
        "crud"
    ]
    assert (
        api.list_namespaced_pod(
            "default", label_selector="t notin (crud)", field_selector="metadata.name=crud"
        ).items
        == []
    )
    on_node = api.list_pod_for_all_namespaces(
        field_selector=f"spec.nodeName={pod.spec.node_name},status.phase=Running"
    )
    assert "crud" in [p.metadata.name for p in on_node.items]
    with pytest.raises(ApiException) as unsupported:
        api.list_namespaced_pod("default", field_selector="spec.image=x")
    assert unsupported.value.status == 400
    api.delete_namespaced_pod("crud", "default", grace_period_seconds=0)
    wait_for(lambda: fake_kubernetes.pod("crud") is None, 10, "the pod to go")
    with pytest.raises(ApiException) as missing:
        api.read_namespaced_pod("crud", "default")
    body = json.loads(missing.value.body)
    assert (missing.value.status, body["kind"], body["reason"], body["code"]) == (
        404,
        "Status",
        "NotFound",
        404,
    )
    with pytest.raises(ApiException) as invalid:
        api.create_namespaced_pod("default", pod_manifest("Bad_Name", ["true"]))
    assert invalid.value.status == 422 and json.loads(invalid.value.body)["reason"] == "Invalid"


def test_watch_streams_changes_from_a_resource_version(fake_kubernetes: FakeKubernetes) -> None:
    from kubernetes import watch
    from kubernetes.client.rest import ApiException

    api = core_api(fake_kubernetes)
    since = api.list_namespaced_pod("default").metadata.resource_version
    api.create_namespaced_pod(
        "default", pod_manifest("watched", ["sh", "-c", "exit 0"], labels={"t": "watch"})
    )
    seen: list[tuple[str, str | None]] = []
    stream = watch.Watch()
    for event in stream.stream(
        api.list_namespaced_pod,
        "default",
        label_selector="t=watch",
        resource_version=since,
        timeout_seconds=30,
    ):
        seen.append((event["type"], event["object"].status.phase))
        if event["object"].status.phase == "Succeeded" and ("DELETING", None) not in seen:
            seen.append(("DELETING", None))
            api.delete_namespaced_pod("watched", "default")
        if event["type"] == "DELETED":
            stream.stop()
    assert seen[0] == ("ADDED", "Pending") and seen[-1][0] == "DELETED"
    assert ("MODIFIED", "Running") in seen or ("MODIFIED", "Succeeded") in seen
    fake_kubernetes.store.compact()
    with pytest.raises(ApiException) as expired:
        for _ in watch.Watch().stream(
            api.list_namespaced_pod, "default", resource_version=since, timeout_seconds=5
        ):
            pass
    assert expired.value.status == 410


def test_exec_with_stdin_exit_code_and_a_tar_stream(fake_kubernetes: FakeKubernetes) -> None:
    api = core_api(fake_kubernetes)
    api.create_namespaced_pod("default", pod_manifest("shell", ["sleep", "600"]))
    _running(api, "shell")
    out, code = _exec(api, "shell", ["sh", "-c", "cat; echo err >&2; exit 3"], stdin=b"hello\n")
    assert (out, code) == ("hello\n", 3)
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        data = b"print('synced')\n"
        info = tarfile.TarInfo("work/main.py")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    _, code = _exec(api, "shell", ["tar", "-x"], stdin=archive.getvalue())  # into the pod's home, its cwd
    assert code == 0
    out, code = _exec(api, "shell", ["sh", "-c", "cd ~ && python3 work/main.py && hostname"])
    assert code == 0 and out.split("\n")[0] == "synced"
    if not fake_kubernetes.loopback:
        assert out.split("\n")[1] == "shell"
    api.delete_namespaced_pod("shell", "default", grace_period_seconds=0)


def test_pods_have_their_own_reachable_ips(fake_kubernetes: FakeKubernetes) -> None:
    if fake_kubernetes.loopback:
        pytest.skip("loopback mode: pods share this machine's network (podIP 127.0.0.1)")
    api = core_api(fake_kubernetes)
    api.create_namespaced_pod("default", pod_manifest("server", ["python3", "-m", "http.server", "8000"]))
    # http.server looks its own name up (getfqdn): the pod's /etc/hosts answers it, as in a real pod
    api.create_namespaced_pod("default", pod_manifest("client", ["sleep", "600"]))
    server, client = _running(api, "server"), _running(api, "client")
    assert server.status.pod_ip != client.status.pod_ip
    fetch = f"import urllib.request as u; print(u.urlopen('http://{server.status.pod_ip}:8000/').status)"
    wait_for(lambda: _exec(api, "client", ["python3", "-c", fetch]) == ("200\n", 0), 20, "pod-to-pod HTTP")
    for name in ("server", "client"):
        api.delete_namespaced_pod(name, "default", grace_period_seconds=0)


def test_services_and_secrets(fake_kubernetes: FakeKubernetes) -> None:
    import base64

    from kubernetes.client.rest import ApiException

    api = core_api(fake_kubernetes)
    service = {
        "metadata": {"name": "ssh-head", "labels": {"t": "svc"}},
        "spec": {"selector": {"app": "x"}, "ports": [{"port": 22}]},
    }
    made = api.create_namespaced_service("default", service)
    assert made.spec.cluster_ip and made.spec.ports[0].target_port == 22
    assert [
        s.metadata.name for s in api.list_namespaced_service("default", label_selector="t=svc").items
    ] == ["ssh-head"]
    api.delete_namespaced_service("ssh-head", "default")
    with pytest.raises(ApiException):
        api.read_namespaced_service("ssh-head", "default")
    api.create_namespaced_secret("default", {"metadata": {"name": "key"}, "stringData": {"id": "secret"}})
    assert base64.b64decode(api.read_namespaced_secret("key", "default").data["id"]) == b"secret"
    assert api.delete_namespaced_secret("key", "default")["status"] == "Success"


def test_exec_with_a_terminal(fake_kubernetes: FakeKubernetes) -> None:
    from kubernetes.stream import stream

    api = core_api(fake_kubernetes)
    api.create_namespaced_pod("default", pod_manifest("tty", ["sleep", "600"]))
    _running(api, "tty")
    call = api.connect_get_namespaced_pod_exec
    out = stream(
        call,
        "tty",
        "default",
        command=["sh", "-c", "test -t 1 && echo terminal"],
        stdin=False,
        stdout=True,
        stderr=True,
        tty=True,
    )
    assert out.strip() == "terminal"
    api.delete_namespaced_pod("tty", "default", grace_period_seconds=0)


def test_delete_collection_by_label(fake_kubernetes: FakeKubernetes) -> None:
    api = core_api(fake_kubernetes)
    for name, team in (("mine-1", "me"), ("mine-2", "me"), ("theirs", "them")):
        api.create_namespaced_pod("default", pod_manifest(name, ["sleep", "600"], labels={"team": team}))
    for name in ("mine-1", "mine-2", "theirs"):
        _running(api, name)
    api.delete_collection_namespaced_pod("default", label_selector="team=me", grace_period_seconds=0)

    def left() -> set[str]:
        return {p.metadata.name for p in api.list_namespaced_pod("default", label_selector="team").items}

    wait_for(lambda: left() == {"theirs"}, 10, "only their pod left")
    api.delete_namespaced_pod("theirs", "default", grace_period_seconds=0)


def test_https_with_the_kubeconfigs_token_only(fake_kubernetes: FakeKubernetes) -> None:
    import ssl
    import urllib.error
    import urllib.request

    assert fake_kubernetes.url.startswith("https://127.0.0.1:")
    trusted = ssl.create_default_context(cadata=fake_kubernetes.ca_pem.decode())
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        request = urllib.request.Request(f"{fake_kubernetes.url}/api/v1/nodes", headers=headers)
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, context=trusted, timeout=10)
        assert refused.value.code == 401 and json.loads(refused.value.read())["reason"] == "Unauthorized"
    with pytest.raises(urllib.error.URLError):  # a client that does not trust the cluster's CA
        urllib.request.urlopen(f"{fake_kubernetes.url}/version", timeout=10)


def test_the_v4_channel_protocol_frame_by_frame(fake_kubernetes: FakeKubernetes, tmp_path: Path) -> None:
    import ssl

    import websocket

    api = core_api(fake_kubernetes)
    api.create_namespaced_pod("default", pod_manifest("v4", ["sleep", "600"]))
    _running(api, "v4")
    (tmp_path / "ca.pem").write_bytes(fake_kubernetes.ca_pem)
    url = fake_kubernetes.url.replace("https://", "wss://") + (
        "/api/v1/namespaces/default/pods/v4/exec?command=sh&command=-c&command=echo+out%3B+echo+err+%3E%262%3B+exit+2"
        "&stdout=true&stderr=true"
    )
    headers = [f"Authorization: Bearer {fake_kubernetes.token}"]
    trust = {"ca_certs": str(tmp_path / "ca.pem"), "cert_reqs": ssl.CERT_REQUIRED}
    socket = websocket.create_connection(
        url, header=headers, subprotocols=["v4.channel.k8s.io"], sslopt=trust
    )
    assert socket.getsubprotocol() == "v4.channel.k8s.io"
    frames: dict[int, bytes] = {}
    while True:
        opcode, data = socket.recv_data()
        if opcode == websocket.ABNF.OPCODE_CLOSE:
            break
        frames[data[0]] = frames.get(data[0], b"") + data[1:]
    assert (frames[1], frames[2]) == (b"out\n", b"err\n")
    status = json.loads(frames[3])
    assert (status["status"], status["reason"]) == ("Failure", "NonZeroExitCode")
    assert status["details"]["causes"] == [{"reason": "ExitCode", "message": "2"}]
    api.delete_namespaced_pod("v4", "default", grace_period_seconds=0)
