"""Volumes on the fake cluster: the PVC calls (``providers/kubernetes/volumes.py``), ``skyhop volumes``,
a task's ``volumes`` at plan time, and a launch whose pods mount one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from skyhop.providers.kubernetes.client import open_context
from skyhop.providers.kubernetes.pods import pod_manifest
from skyhop.providers.kubernetes.settings import KubernetesSettings
from skyhop.providers.kubernetes.volumes import (
    VOLUME_LABEL,
    VolumeError,
    apply_volume,
    delete_volume,
    list_volumes,
)
from skyhop.spec.volume import VolumeSpec
from tests.conftest import skyhop
from tests.fakes.kubernetes import FakeKubernetes
from tests.fakes.kubernetes.fixture import core_api
from tests.fakes.kubernetes.fixture import pod_manifest as client_pod
from tests.helpers import WorkerProcess
from tests.integration.support import unique_cluster
from tests.kubernetes.conftest import use_kubeconfig


def _api(fake: FakeKubernetes) -> Any:
    return open_context(KubernetesSettings(kubeconfig=str(fake.kubeconfig())), None)


def _spec(name: str, **fields: Any) -> VolumeSpec:
    return VolumeSpec.model_validate({"name": name, "size": "1Gi", **fields})


def _volume_file(folder: Path, name: str, **fields: Any) -> str:
    path = folder / f"{name}.yaml"
    path.write_text(
        yaml.safe_dump({"name": name, "type": "k8s-pvc", "infra": "k8s", "size": "2Gi", **fields})
    )
    return str(path)


def test_apply_creates_a_labelled_claim_and_again_is_a_no_op(fake_kubernetes: FakeKubernetes) -> None:
    api = _api(fake_kubernetes)
    spec = _spec("vol-apply", config={"access_mode": "ReadWriteMany", "storage_class_name": "fast"})
    assert "created volume" in apply_volume(api, spec)
    writes = len(fake_kubernetes.writes())
    assert "already there as asked" in apply_volume(api, spec)
    assert len(fake_kubernetes.writes()) == writes + 1  # the create that met AlreadyExists, nothing else
    claim = fake_kubernetes.store.get("persistentvolumeclaims", "default", "vol-apply")
    assert claim["metadata"]["labels"] == {
        VOLUME_LABEL: "vol-apply",
        "app.kubernetes.io/managed-by": "skyhop",
    }
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    assert claim["spec"]["storageClassName"] == "fast"
    (record,) = list_volumes(api, "vol-apply")
    assert (record.size, record.status, record.created_by_skyhop, record.users) == ("1Gi", "Bound", True, ())
    with pytest.raises(VolumeError, match="exists with size 1Gi \\(asked 5Gi\\)"):
        apply_volume(api, _spec("vol-apply", size="5Gi", config={"access_mode": "ReadWriteMany"}))
    assert "deleted volume" in delete_volume(api, "vol-apply")
    assert fake_kubernetes.store.find("persistentvolumeclaims", "default", "vol-apply") is None


def test_a_foreign_claim_is_used_only_with_use_existing_and_never_deleted(
    fake_kubernetes: FakeKubernetes,
) -> None:
    core = core_api(fake_kubernetes)
    foreign = {
        "metadata": {"name": "team-data"},
        "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "3Gi"}}},
    }
    core.create_namespaced_persistent_volume_claim("default", foreign)
    api = _api(fake_kubernetes)
    with pytest.raises(VolumeError, match="skyhop did not create; add use_existing: true"):
        apply_volume(api, _spec("team-data"))
    assert list_volumes(api, "team-data") == []
    assert "now uses the existing PVC" in apply_volume(api, _spec("team-data", use_existing=True))
    (record,) = list_volumes(api, "team-data")
    assert (record.size, record.created_by_skyhop) == ("3Gi", False)
    assert "left as it is" in delete_volume(api, "team-data")
    claim = fake_kubernetes.store.get("persistentvolumeclaims", "default", "team-data")
    assert VOLUME_LABEL not in (claim["metadata"].get("labels") or {})
    core.delete_namespaced_persistent_volume_claim("team-data", "default")


def test_delete_is_refused_while_a_pod_mounts_the_volume(fake_kubernetes: FakeKubernetes) -> None:
    api = _api(fake_kubernetes)
    apply_volume(api, _spec("vol-busy"))
    pod = client_pod("busy-pod", labels={"skyhop.dev/cluster": "busy"})
    pod["spec"]["volumes"] = [{"name": "v", "persistentVolumeClaim": {"claimName": "vol-busy"}}]
    pod["spec"]["containers"][0]["volumeMounts"] = [{"name": "v", "mountPath": "/root/data"}]
    core_api(fake_kubernetes).create_namespaced_pod("default", pod)
    (record,) = list_volumes(api, "vol-busy")
    assert record.users == ("busy",)
    with pytest.raises(VolumeError, match="in use by cluster busy"):
        delete_volume(api, "vol-busy")
    core_api(fake_kubernetes).delete_namespaced_pod("busy-pod", "default", grace_period_seconds=0)
    assert "deleted volume" in delete_volume(api, "vol-busy")


def test_a_pod_manifest_mounts_each_claim_at_its_paths() -> None:
    from skyhop.providers.base import Offering

    offering = Offering(provider="kubernetes", instance_type="4CPU--16GB", cpus=4, memory_gib=16, price=0)
    manifest = pod_manifest(
        "c", 0, offering, None, "img", [], volumes={"/data": "a", "/ckpt": "b", "/d2": "a"}
    )
    assert manifest["spec"]["volumes"] == [
        {"name": "volume-0", "persistentVolumeClaim": {"claimName": "a"}},
        {"name": "volume-1", "persistentVolumeClaim": {"claimName": "b"}},
    ]
    assert manifest["spec"]["containers"][0]["volumeMounts"] == [
        {"name": "volume-0", "mountPath": "/data"},
        {"name": "volume-1", "mountPath": "/ckpt"},
        {"name": "volume-0", "mountPath": "/d2"},
    ]


def test_volumes_cli_apply_ls_delete(
    fake_kubernetes: FakeKubernetes, cli_env: dict[str, str], tmp_path: Path
) -> None:
    with use_kubeconfig(fake_kubernetes.kubeconfig()):
        applied = skyhop("volumes", "apply", "-y", _volume_file(tmp_path, "cli-vol"), env=cli_env)
        assert applied.returncode == 0, applied.stderr
        again = skyhop("volumes", "apply", "-y", _volume_file(tmp_path, "cli-vol"), env=cli_env)
        assert again.returncode == 0 and "already there as asked" in again.stderr, again.stderr
        listed = skyhop("volumes", "ls", "--json", env=cli_env)
        assert listed.returncode == 0, listed.stderr
        document = json.loads(listed.stdout)
        (item,) = [i for i in document["items"] if i["name"] == "cli-vol"]
        assert document["kind"] == "volumes"
        assert item | {"used_by": []} == {
            "name": "cli-vol",
            "type": "k8s-pvc",
            "infra": "k8s/fake",
            "namespace": "default",
            "size": "2Gi",
            "access_mode": "ReadWriteOnce",
            "storage_class": "standard",
            "status": "Bound",
            "created_by_skyhop": True,
            "used_by": [],
        }
        table = skyhop("volumes", "ls", env=cli_env)
        assert "cli-vol" in table.stdout and "Bound" in table.stdout
        other = skyhop(
            "volumes", "apply", "-y", _volume_file(tmp_path, "rp", type="runpod-network-volume"), env=cli_env
        )
        assert other.returncode == 2
        assert "type: volume type 'runpod-network-volume' is not supported" in other.stderr
        deleted = skyhop("volumes", "delete", "-y", "cli-vol", "no-such-vol", env=cli_env)
        assert deleted.returncode == 1
        assert "deleted volume 'cli-vol'" in deleted.stderr and "'no-such-vol': not found" in deleted.stderr
        assert fake_kubernetes.store.find("persistentvolumeclaims", "default", "cli-vol") is None


def _task_file(folder: Path, **fields: Any) -> str:
    path = folder / "task.yaml"
    path.write_text(yaml.safe_dump({"run": "true", **fields}))
    return str(path)


def test_dryrun_pins_the_task_to_its_volume_and_names_a_missing_one(
    fake_kubernetes: FakeKubernetes, cli_env: dict[str, str], tmp_path: Path
) -> None:
    api = _api(fake_kubernetes)
    apply_volume(api, _spec("plan-vol"))
    with use_kubeconfig(fake_kubernetes.kubeconfig()):
        planned = skyhop(
            "launch",
            "--dryrun",
            "--json",
            _task_file(tmp_path, volumes={"/mnt/data": "plan-vol"}),
            env=cli_env,
        )
        assert planned.returncode == 0, planned.stderr
        (item,) = json.loads(planned.stdout)["items"]
        assert (item["provider"], item["region"]) == ("kubernetes", "fake")
        assert item["volumes"] == {"/mnt/data": "plan-vol"}
        missing = skyhop(
            "launch", "--dryrun", _task_file(tmp_path, volumes={"/mnt/x": {"name": "nope"}}), env=cli_env
        )
        assert missing.returncode == 2
        assert (
            "volumes./mnt/x: volume 'nope' not found; create it with skyhop volumes apply" in missing.stderr
        )
        elsewhere = skyhop(
            "launch",
            "--dryrun",
            _task_file(tmp_path, volumes={"/d": "plan-vol"}, resources={"infra": "local"}),
            env=cli_env,
        )
        assert elsewhere.returncode == 2
        assert "resources.infra: 'local' conflicts with volume 'plan-vol'" in elsewhere.stderr
        wide = skyhop(
            "launch",
            "--dryrun",
            "--num-nodes",
            "2",
            _task_file(tmp_path, volumes={"/d": "plan-vol"}),
            env=cli_env,
        )
        assert wide.returncode == 2 and "is ReadWriteOnce: one node may mount it" in wide.stderr
    with use_kubeconfig(tmp_path / "no-kubeconfig"):
        blind = skyhop("launch", "--dryrun", _task_file(tmp_path, volumes={"/d": "plan-vol"}), env=cli_env)
        assert blind.returncode == 2
        assert (
            "cannot plan: volumes are on Kubernetes and no kubeconfig context is configured" in blind.stderr
        )
    delete_volume(api, "plan-vol")


def test_a_job_writes_into_a_volume_and_another_clusters_job_reads_it(
    fake_kubernetes: FakeKubernetes, cli_env: dict[str, str], live_worker: WorkerProcess, tmp_path: Path
) -> None:
    api = _api(fake_kubernetes)
    apply_volume(api, _spec("shared", config={"access_mode": "ReadWriteMany"}))
    writer, reader = unique_cluster("vw"), unique_cluster("vr")
    with use_kubeconfig(fake_kubernetes.kubeconfig()):
        # /root is the pod's home: ~/shared is the mount on the fake in either of its modes.
        task = {"volumes": {"/root/shared": "shared"}, "resources": {"cpus": 1}}
        wrote = skyhop(
            "launch",
            "-y",
            "-c",
            writer,
            _task_file(tmp_path, **task, run="echo from-$HOSTNAME > ~/shared/note"),
            env=cli_env,
            timeout=300,
        )
        assert wrote.returncode == 0, wrote.stdout + wrote.stderr
        (pod,) = [p for p in fake_kubernetes.pods() if p["metadata"]["name"] == f"{writer}-0"]
        assert pod["spec"]["volumes"] == [
            {"name": "volume-0", "persistentVolumeClaim": {"claimName": "shared"}}
        ]
        busy = skyhop("volumes", "delete", "-y", "shared", env=cli_env)
        assert busy.returncode == 1 and f"in use by cluster {writer}" in busy.stderr
        read = skyhop(
            "launch",
            "-y",
            "-c",
            reader,
            _task_file(tmp_path, **task, run="cat ~/shared/note"),
            env=cli_env,
            timeout=300,
        )
        assert read.returncode == 0, read.stdout + read.stderr
        assert f"from-{writer}-0" in read.stdout
        for cluster in (writer, reader):
            assert skyhop("down", "-y", cluster, env=cli_env, timeout=300).returncode == 0
        gone = skyhop("volumes", "delete", "-y", "shared", env=cli_env)
        assert gone.returncode == 0, gone.stderr
