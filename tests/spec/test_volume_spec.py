"""Volume files and a task's ``volumes`` (``spec/volume.py``): SkyPilot's forms, refused ones in one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from skyhop.spec import SpecError, task_from_dict
from skyhop.spec.volume import AccessMode, load_volume_file


def test_a_task_mounts_volumes_by_name_in_either_form(tmp_path: Path) -> None:
    task = task_from_dict(
        {"run": "true", "volumes": {"/mnt/data/": "data", "/ckpt": {"name": "ckpt"}}}, tmp_path
    )
    assert task.volumes == {"/mnt/data": "data", "/ckpt": "ckpt"}


def _volume(tmp_path: Path, doc: dict[str, Any]) -> Path:
    path = tmp_path / "volume.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_a_volume_file_in_skypilots_form(tmp_path: Path) -> None:
    doc = {
        "name": "model-checkpoints",
        "type": "k8s-pvc",
        "infra": "kubernetes/gke-a",
        "size": "100G",
        "labels": {"team": "ml"},
        "config": {"access_mode": "ReadWriteMany", "storage_class_name": "filestore"},
    }
    spec = load_volume_file(str(_volume(tmp_path, doc)))
    assert (spec.size, spec.context, spec.infra) == ("100Gi", "gke-a", "k8s/gke-a")
    assert spec.config.access_mode is AccessMode.READ_WRITE_MANY
    assert load_volume_file(str(_volume(tmp_path, {"name": "v", "size": 5}))).size == "5Gi"


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (
            {"name": "v", "type": "runpod-network-volume", "size": "1Gi"},
            "type: volume type 'runpod-network-volume' is not supported",
        ),
        ({"name": "v", "type": "nfs", "size": "1Gi"}, "type: unknown volume type 'nfs'; allowed: k8s-pvc"),
        ({"name": "v"}, "size is required to create a volume (such as 100Gi), unless use_existing: true"),
        (
            {"name": "v", "size": "1Gi", "infra": "aws"},
            "infra: volumes are on Kubernetes: use k8s or k8s/<context>",
        ),
        ({"name": "v", "size": "big"}, "size: size must be a quantity such as 100Gi"),
        (
            {"name": "v", "size": "1Gi", "config": {"namespace": "x"}},
            "config.namespace: unknown field; allowed: storage_class_name, access_mode",
        ),
        (
            {"name": "v", "size": "1Gi", "config": {"access_mode": "Everyone"}},
            "config.access_mode: Input should be",
        ),
    ],
)
def test_a_bad_volume_file_is_one_line(tmp_path: Path, doc: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError) as raised:
        load_volume_file(str(_volume(tmp_path, doc)))
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)
