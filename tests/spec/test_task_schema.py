"""Every field of SkyPilot's task schema, through ``skyhop launch --dryrun --json``: acted on or refused.

In process (the Typer app, as the CLI runs it) to keep CI fast; one case runs the real CLI.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from skyhop.cli.app import app
from skyhop.providers.base import AcceleratorArgs
from skyhop.spec import Task
from tests.conftest import skyhop
from tests.helpers import embedded_env

SECRET = "s3cr3t-value"


def _dryrun(tmp_path: Path, doc: Any, *flags: str, launch: bool = False) -> tuple[int, str]:
    path = tmp_path / "task.yaml"
    docs = doc if isinstance(doc, list) else [doc]
    path.write_text(yaml.safe_dump_all(docs))
    argv = ["launch", str(path), *flags] + ([] if launch else ["--dryrun", "--json"])
    result = CliRunner().invoke(app, argv)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output


def _item(tmp_path: Path, doc: Any, *flags: str) -> dict[str, Any]:
    code, output = _dryrun(tmp_path, doc, *flags)
    assert code == 0, output
    return dict(json.loads(output)["items"][0])


AWS = {"infra": "aws", "cpus": 2}

ACCEPTED: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("gpus", {"resources": {"gpus": "A100:8"}}, {"accelerators": {"A100": 8.0}}),
    ("disk_size unit", {"resources": {**AWS, "disk_size": "1024GB"}}, {"disk_size": 1024}),
    ("disk_size T", {"resources": {**AWS, "disk_size": "1T"}}, {"disk_size": 1024}),
    ("ephemeral_storage", {"resources": {**AWS, "ephemeral_storage": 300}}, {"disk_size": 300}),
    ("disk_tier", {"resources": {**AWS, "disk_tier": "high"}}, {"disk_tier": "high", "provider": "aws"}),
    ("disk_tier best", {"resources": {"cpus": 2, "disk_tier": "best"}}, {"disk_tier": "best"}),
    ("network_tier", {"resources": {**AWS, "network_tier": "best"}}, {"network_tier": "best"}),
    ("labels", {"resources": {**AWS, "labels": {"team": "ml"}}}, {"labels": {"team": "ml"}}),
    ("ports int", {"resources": {**AWS, "ports": 8080}}, {"provider": "aws"}),
    ("ports list", {"resources": {**AWS, "ports": [8080, "9000-9010"]}}, {"provider": "aws"}),
    ("autostop str", {"resources": {"autostop": "30m"}}, {}),
    ("autostop dict", {"resources": {"autostop": {"idle_minutes": 5, "down": True, "wait_for": "jobs"}}}, {}),
    ("infra wildcard", {"resources": {"infra": "*/us-east-1", "cpus": 2}}, {"region": "us-east-1"}),
    ("no-effect", {"resources": {"_no_missing_accel_warnings": True}, "_metadata": {"git": "x"}}, {}),
    ("config inert", {"config": {"vast": {"x": 1}, "slurm": {}}}, {"config": {}}),
    (
        "config acted on",
        {
            "resources": {"infra": "gcp", "cpus": 2, "image_id": "docker:ubuntu:22.04"},
            "config": {
                "docker": {"run_options": ["--shm-size=8g", "-v /data:/data"]},
                "kubernetes": {
                    "pod_config": {"spec": {"runtimeClassName": "nvidia"}},
                    "provision_timeout": 900,
                },
                "gcp": {"enable_gvnic": True},
            },
        },
        {
            "provider": "gcp",
            "config": {
                "docker": {"run_options": ["--shm-size=8g", "-v /data:/data"]},
                "kubernetes": {
                    "pod_config": {"spec": {"runtimeClassName": "nvidia"}},
                    "provision_timeout": 900,
                },
                "gcp": {"enable_gvnic": True},
            },
        },
    ),
    ("api_server_access false", {"api_server_access": False}, {}),
    (
        "storage: a bucket folder mounted, an empty name",
        {"file_mounts": {"/a": {"source": "s3://bkt/sub/dir"}, "/b": {"name": "", "source": "gs://other"}}},
        {
            "file_mounts": {
                "/a": {
                    "name": None,
                    "source": "s3://bkt/sub/dir",
                    "store": None,
                    "persistent": True,
                    "mode": "MOUNT",
                },
                "/b": {
                    "name": None,
                    "source": "gs://other",
                    "store": None,
                    "persistent": True,
                    "mode": "MOUNT",
                },
            }
        },
    ),
    (
        "storage: a MinIO bucket copied (SkyPilot's minio examples)",
        {"file_mounts": {"/dataset-demo": {"source": "minio://sky-demo-dataset", "mode": "COPY"}}},
        {
            "file_mounts": {
                "/dataset-demo": {
                    "name": None,
                    "source": "minio://sky-demo-dataset",
                    "store": None,
                    "persistent": True,
                    "mode": "COPY",
                }
            }
        },
    ),
    (
        "any_of skips a missing cloud",
        {"resources": {"any_of": [{"infra": "lambda", "cpus": 2}, {"infra": "gcp", "cpus": 2}]}},
        {"provider": "gcp"},
    ),
    (
        "git workdir",
        {"workdir": {"url": "file:///r", "ref": "v1"}},
        {"workdir": {"url": "file:///r", "ref": "v1"}},
    ),
    ("service", {"service": {"readiness_probe": "/health", "replicas": 2}}, {"service": True}),
    (
        "any_of zone on the outer cloud",
        {"resources": {"cloud": "gcp", "cpus": 2, "use_spot": True, "any_of": [{"zone": "us-central1-a"}]}},
        {"provider": "gcp", "zone": "us-central1-a"},
    ),
    ("spot_recovery", {"resources": {"spot_recovery": "FAILOVER"}}, {}),
    *[
        (
            f"image_id docker on {cloud}",  # a container, never passed to the cloud as a machine image
            {"resources": {"infra": cloud, "cpus": 2, "image_id": "docker:ubuntu:20.04"}},
            {"docker_image": "ubuntu:20.04", "image_id": None, "provider": cloud},
        )
        for cloud in ("aws", "gcp", "azure", "local")
    ],
]


@pytest.mark.parametrize(("case", "doc", "expected"), ACCEPTED, ids=[c[0] for c in ACCEPTED])
def test_a_field_is_acted_on(
    tmp_path: Path, case: str, doc: dict[str, Any], expected: dict[str, Any]
) -> None:
    item = _item(tmp_path, {"run": "echo hi", **doc})
    assert {key: item[key] for key in expected} == expected


REFUSED: list[tuple[dict[str, Any], str]] = [
    (
        {"resources": {"accelerators": "tpu-v4-32"}},
        "resources.accelerators: tpu-v4-32 is a multi-host TPU slice; skyhop launches single-host slices",
    ),
    ({"resources": {"accelerators": "tpu-v2-8:2"}}, "tpu-v2-8:2: a TPU slice counts once"),
    (
        {"resources": {"accelerators": "tpu-v2-8", "accelerator_args": {"tpu_vm": False}}},
        "resources.accelerator_args: tpu_vm: false: TPU nodes (a TPU beside a separate host VM)",
    ),
    (
        {"resources": {"accelerators": "tpu-v2-8", "accelerator_args": {"gcp_queued_resource": True}}},
        "resources.accelerator_args: gcp_queued_resource: true: queued resources are not supported",
    ),
    (
        {"resources": {"accelerators": "tpu-v2-8", "accelerator_args": {"tpu_name": "Bad_Name"}}},
        "tpu_name 'Bad_Name' must be 1-50 lowercase letters",
    ),
    ({"resources": {"accelerators": "tpu-v2-8", "accelerator_args": {"zone": "x"}}}, "accelerator_args.zone"),
    ({"resources": {"accelerators": "tpu-v2-8", "disk_size": 100}}, "disk_size with tpu-v2-8: a TPU VM's"),
    (
        {"resources": {"accelerators": "tpu-v2-8", "image_id": "img"}},
        "image_id with tpu-v2-8: a TPU VM boots",
    ),
    ({"event_callback": "echo"}, "event_callback: not supported"),
    ({"file_mounts_mapping": {}}, "file_mounts_mapping: is internal to SkyPilot"),
    ({"volumes": {"a": "b"}}, "volumes: mount path 'a' must be an absolute path"),
    ({"volumes": {"/d": {"size": "10Gi"}}}, "volumes: /d: ephemeral volumes (size:) are not supported yet"),
    ({"volumes": {"/d": "Bad_Name"}}, "volumes: volume name 'Bad_Name' must be 1-63 lower case"),
    (
        {"volume_mounts": []},
        "volume_mounts: is internal to SkyPilot (it writes it itself); leave it out: mount",
    ),
    ({"managed_secrets": ["A"]}, "managed_secrets: managed secret stores are not supported"),
    ({"secrets": ["A"]}, "secrets: managed secret references are not supported"),
    ({"api_server_access": True}, "api_server_access: skyhop has no API server"),
    ({"config": {"docker": {"run_options": [3]}}}, "config.docker.run_options: each run option must be"),
    ({"config": {"docker": {"login": {}}}}, "config.docker.login: not a setting a task may override"),
    (
        {"config": {"gcp": {"managed_instance_group": {"run_duration": 3600}}}},
        "config.gcp.managed_instance_group: DWS managed instance groups are not supported",
    ),
    ({"config": {"gcp": {"placement_policy": "compact"}}}, "config.gcp.placement_policy: compact placement"),
    ({"config": {"gcp": {"enable_gpu_direct": True}}}, "config.gcp.enable_gpu_direct: GPUDirect-TCPX"),
    ({"config": {"gcp": {"use_internal_ips": True}}}, "config.gcp.use_internal_ips: not a setting a task"),
    ({"config": {"kubernetes": {"kueue": {}}}}, "config.kubernetes.kueue: Kueue queues are not supported"),
    (
        {"config": {"kubernetes": {"enable_docker": "yes"}}},
        "config.kubernetes.enable_docker: must be one of true, false, all, build or {mode: all|build, "
        "cache_volume: VOLUME}, got 'yes'",
    ),
    (
        {"config": {"kubernetes": {"container_tools": {"mode": "all", "size": 10}}}},
        "config.kubernetes.enable_docker: must be one of true, false, all, build",
    ),
    (
        {"config": {"kubernetes": {"enable_docker": {"mode": "build", "cache_volume": "Cache"}}}},
        "config.kubernetes.enable_docker: volume name 'Cache' must be 1-63 lower case",
    ),
    (
        {"config": {"kubernetes": {"enable_docker": True, "image_builder": "build"}}},
        "config.kubernetes: enable_docker and image_builder are one setting (enable_docker): give one",
    ),
    (
        {
            "resources": {"infra": "k8s", "image_id": "docker:ubuntu:22.04"},
            "config": {"docker": {"run_options": ["--shm-size=8g", "--ulimit memlock=-1"]}},
        },
        "config.docker.run_options: kubernetes does not support the docker run option '--ulimit'",
    ),
    ({"config": {"nvidia_gpus": {"disable_ecc": True}}}, "config.nvidia_gpus:"),
    (
        {"resources": {"job_recovery": {"strategy": "DYNAMIC_NODE_SET", "min_nodes": 4}}},
        "resources.job_recovery: strategy DYNAMIC_NODE_SET (a node set that replaces lost nodes under "
        "the running job, down to min_nodes) is not supported yet: skyhop recovers a managed job by "
        "relaunching its whole cluster; use EAGER_NEXT_REGION or FAILOVER",
    ),
    (
        {"file_mounts": {"/d": {"name": "bkt", "store": "nebius"}}},
        "file_mounts./d.store: the bucket is on nebius: skyhop has no provider for nebius",
    ),
    (
        {"resources": {"image_id": {"us-east-1": "docker:ubuntu:22.04"}}},
        "a container image is the same in every region; give image_id: docker:IMAGE",
    ),
    ({"resources": {"image_id": "docker:"}}, "must be docker:IMAGE"),
    (
        {"resources": {"any_of": [{"infra": "aws", "image_id": "docker:a"}, {"infra": "gcp"}]}},
        "every any_of/ordered alternative must run in the same container",
    ),
    (
        {
            "resources": {"image_id": "docker:ubuntu:22.04"},
            "file_mounts": {"/ckpt": {"name": "my-bucket", "mode": "MOUNT_CACHED"}},
        },
        "file_mounts: /ckpt: MOUNT_CACHED is flushed by the node, outside the task's container",
    ),
    (
        {"resources": {"accelerator_args": {"tpu_vm": True}}},
        "accelerator_args are TPU options; ask for a TPU",
    ),
    ({"resources": {"priority": 5}}, "resources.priority: skyhop runs a cluster's jobs first in, first out"),
    ({"resources": {"local_disk": "nvme"}}, "resources.local_disk:"),
    (
        {"resources": {"priority_class": "High_P"}},
        "resources.priority_class: a Kubernetes PriorityClass name",
    ),
    ({"resources": {"infra": "aws", "priority_class": "high"}}, "aws does not support priority classes"),
    ({"resources": {"volumes": []}}, "resources.volumes:"),
    ({"resources": {"any_of": [{"priority": 1}]}}, "resources.any_of.0.priority:"),
    ({"resources": {"autostop": {"wait_for": "jobs_and_ssh"}}}, "counts only jobs as activity"),
    ({"resources": {"autostop": {"hook": "echo"}}}, "autostop hooks are not supported"),
    ({"resources": {"gpus": "A100", "accelerators": "L4"}}, "'gpus' is another name for 'accelerators'"),
    ({"resources": {"infra": "azure", "disk_tier": "ultra"}}, "azure does not support disk tier ultra"),
    ({"resources": {"infra": "local", "labels": {"a": "b"}}}, "local does not support labels on its nodes"),
    ({"resources": {"infra": "lambda"}}, "resources.infra: skyhop has no provider for lambda"),
    (
        {"resources": {"any_of": [{"cloud": "lambda"}, {"infra": "runpod"}]}},
        "every alternative: skyhop has no",
    ),
    ({"resources": {"disk_size": "lots"}}, "disk_size must be GB like 256"),
    ({"service": {"replica_policy": {"max_replicas": 3}}}, "service.replica_policy.min_replicas"),
    ({"service": {"replicas": 2, "bogus": 1}}, "service.bogus"),
    (
        {"service": {"replica_policy": {"min_replicas": 1, "base_on_demand_fallback_replicas": 1}}},
        "(did you mean 'base_ondemand_fallback_replicas'?); allowed: base_ondemand_fallback_replicas,",
    ),
    ({"inputs": {"a": 1, "b": 2}}, "inputs must be one {path: GB}"),
    (
        {"file_mounts": {"/data": {"name": "bkt", "store": "oci"}}},
        "file_mounts./data.store: the bucket is on oci: skyhop has no provider for oci",
    ),
    (
        {"file_mounts": {"/ckpt": {"source": "nebius://ckpts", "mode": "MOUNT"}}},
        "file_mounts./ckpt.source: the bucket is on nebius: skyhop has no provider for nebius",
    ),
    ({"file_mounts": {"/ckpt": "cos://us-east/ckpts"}}, "file_mounts./ckpt: the bucket is on ibm"),
    (
        {"envs": {"BUCKET": "nebius://ckpts"}, "file_mounts": {"/ckpt": {"source": "${BUCKET}"}}},
        "file_mounts./ckpt.source: the bucket is on nebius",
    ),
    (
        {"file_mounts": {"/vol": {"name": "vol", "type": "VOLUME"}}},
        "file_mounts: /vol.type: a storage entry is a bucket (name, source, store, persistent, mode); mount",
    ),
]


@pytest.mark.parametrize(("doc", "message"), REFUSED, ids=[m.split(":")[0][:40] for _, m in REFUSED])
def test_a_field_is_refused_in_one_line_saying_why(tmp_path: Path, doc: dict[str, Any], message: str) -> None:
    code, output = _dryrun(tmp_path, {"run": "echo hi", **doc})
    assert code == 2 and message in output, output
    assert len(output.strip().splitlines()) == 1 and "Traceback" not in output


@pytest.mark.parametrize("name", ["tpu-v2-8", "TPU-V2-8", "v2-8", "tpu-v2-8:1"])
def test_a_tpu_slice_plans_on_gcp_as_a_tpu_vm_at_its_zone_price(tmp_path: Path, name: str) -> None:
    args = {"runtime_version": "tpu-vm-base", "tpu_vm": True, "tpu_name": "my-tpu"}
    item = _item(tmp_path, {"resources": {"accelerators": name, "accelerator_args": args}})
    assert (item["provider"], item["instance_type"], item["accelerators"]) == (
        "gcp",
        "tpu-v2-8",
        {"tpu-v2-8": 1.0},
    )
    assert (item["zone"], item["hourly_cost"]) == ("us-central1-b", 4.5)
    assert item["accelerator_args"] == {"runtime_version": "tpu-vm-base", "tpu_name": "my-tpu"}
    assert {c["zone"] for c in item["candidates"]} >= {"us-central1-c", "us-central1-f", "europe-west4-a"}


def test_tpu_options_go_only_to_the_alternatives_that_ask_for_a_tpu(tmp_path: Path) -> None:
    resources = {"accelerators": {"tpu-v5litepod-8": 1, "T4": 1}, "accelerator_args": {"tpu_name": "pod"}}
    task = Task.model_validate({"run": "echo", "resources": resources})
    by_accelerator = {str(alt.accelerators): alt.accelerator_args for alt in task.resources.alternatives}
    assert by_accelerator == {
        "{'TPU-V5LITEPOD-8': 1.0}": AcceleratorArgs(tpu_name="pod"),
        "{'T4': 1.0}": None,
    }
    item = _item(tmp_path, {"resources": {**resources, "use_spot": True}})
    assert item["accelerators"] == {"T4": 1.0} and item["accelerator_args"] is None  # T4 spot is cheaper


def test_max_hourly_cost_leaves_dearer_offerings_out(tmp_path: Path) -> None:
    item = _item(tmp_path, {"resources": {"infra": "aws", "cpus": "8+", "max_hourly_cost": 0.5}})
    assert all(c["hourly_cost"] <= 0.5 for c in item["candidates"])
    code, output = _dryrun(tmp_path, {"resources": {"infra": "aws", "gpus": "A100:8", "max_hourly_cost": 1}})
    assert code == 1 and "A100" in output


def test_inputs_on_another_cloud_weigh_their_egress(tmp_path: Path) -> None:
    task = {"run": "x", "resources": {"any_of": [{"infra": "gcp", "cpus": 4}, {"infra": "aws", "cpus": 4}]}}
    assert _item(tmp_path, task)["provider"] == "aws"
    assert _item(tmp_path, {**task, "inputs": {"gs://bucket/data": 500}})["provider"] == "gcp"
    assert _item(tmp_path, {**task, "inputs": {"s3://bucket/data": 500}})["provider"] == "aws"


def test_env_vars_fill_workdir_and_file_mount_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("small", "large"):
        (tmp_path / f"data-{name}").mkdir()
    task = {
        "envs": {"SIZE": "small"},
        "workdir": "./data-${SIZE}",
        "file_mounts": {"~/d-$SIZE": "./data-${SIZE}"},
    }
    item = _item(tmp_path, {"run": "x", **task})
    assert item["workdir"] == str(tmp_path / "data-small")
    assert item["file_mounts"] == {"~/d-small": str(tmp_path / "data-small")}
    item = _item(tmp_path, {"run": "x", **task}, "--env", "SIZE=large")
    assert item["file_mounts"] == {"~/d-large": str(tmp_path / "data-large")}


def test_secrets_are_required_overridable_and_never_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    task = {"run": "x", "secrets": {"HF_TOKEN": None, "OTHER": SECRET}}
    code, output = _dryrun(tmp_path, task)
    assert code == 2 and "secrets.HF_TOKEN: required but not set; pass --secret HF_TOKEN=VALUE" in output
    item = _item(tmp_path, task, "--secret", f"HF_TOKEN={SECRET}")
    assert item["secrets"] == {"HF_TOKEN": "<redacted>", "OTHER": "<redacted>"}
    code, output = _dryrun(tmp_path, task, "--secret", f"HF_TOKEN={SECRET}", "--infra", "lambdalabs")
    assert code == 2 and SECRET not in output
    code, output = _dryrun(tmp_path, {"run": "x", "secrets": {"bad-name": SECRET}})
    assert code == 2 and "secrets:" in output and SECRET not in output
    mounted = {"run": "x", "secrets": {"TOK": None}, "file_mounts": {"~/d": "./${TOK}"}}
    code, output = _dryrun(tmp_path, mounted, "--secret", f"TOK={SECRET}")
    assert code == 2 and "local path './<redacted>' does not exist" in output and SECRET not in output
    (tmp_path / SECRET).mkdir()
    monkeypatch.chdir(tmp_path)
    item = _item(tmp_path, mounted, "--secret", f"TOK={SECRET}")
    assert item["file_mounts"] == {"~/d": str(tmp_path / "<redacted>")}


def test_secrets_stay_out_of_the_real_cli_output(tmp_path: Path) -> None:
    (tmp_path / "t.yaml").write_text(yaml.safe_dump({"run": "x", "secrets": {"TOKEN": None}}))
    env = embedded_env(tmp_path / "home")
    for flags in ([], ["--json"]):
        argv = ["launch", "--dryrun", *flags, str(tmp_path / "t.yaml"), "--secret", f"TOKEN={SECRET}"]
        result = skyhop(*argv, env=env, timeout=60)
        assert result.returncode == 0, result.stderr
        assert SECRET not in result.stdout + result.stderr


def test_a_job_group_is_planned_task_by_task_and_launch_points_to_jobs_launch(tmp_path: Path) -> None:
    group = [{"name": "g", "execution": "parallel"}, {"name": "a", "run": "x"}, {"name": "b", "run": "y"}]
    code, output = _dryrun(tmp_path, group)
    assert code == 0 and [i["name"] for i in json.loads(output)["items"]] == ["a", "b"]
    code, output = _dryrun(tmp_path, group, "-y", launch=True)
    assert code == 2 and "job group of 2 tasks" in output and "skyhop jobs launch" in output
    code, output = _dryrun(tmp_path, [{"name": "p"}, {"run": "x"}, {"run": "y"}], "-y", launch=True)
    assert code == 2 and "pipeline of 2 tasks" in output
    header = {"name": "g", "execution": "parallel", "primary_tasks": ["a"], "termination_delay": "5s"}
    code, output = _dryrun(tmp_path, [header, *group[1:]])
    assert code == 0 and [i["name"] for i in json.loads(output)["items"]] == ["a", "b"]
    code, output = _dryrun(tmp_path, [{**header, "primary_tasks": ["c"]}, *group[1:]])
    assert code == 2 and "primary_tasks: no task is named 'c'" in output


def test_jobs_launch_dryrun_plans_a_same_infra_group_in_one_region(tmp_path: Path) -> None:
    header = {"name": "g", "execution": "parallel", "primary_tasks": ["a"], "placement": "SAME_INFRA"}
    tasks = [
        {"name": "a", "run": "x", "resources": {"accelerators": "A100:1"}},
        {"name": "b", "run": "y", "resources": {"cpus": "4+"}},
    ]
    path = tmp_path / "group.yaml"
    path.write_text(yaml.safe_dump_all([header, *tasks]))
    for command in (["launch"], ["jobs", "launch"]):
        result = CliRunner().invoke(app, [*command, "--dryrun", "--json", str(path)])
        assert result.exit_code == 0, result.output
        items = json.loads(result.output)["items"]
        assert [(i["name"], i["primary"]) for i in items] == [("a", True), ("b", False)]
        assert len({(i["provider"], i["region"]) for i in items}) == 1, items
    text = CliRunner().invoke(app, ["jobs", "launch", "--dryrun", str(path)])
    assert text.exit_code == 0 and "Job group g: every task at once; it ends with a" in text.output


def test_launch_of_a_service_runs_the_task_and_says_serve_up_reads_the_section(tmp_path: Path) -> None:
    path = tmp_path / "svc.yaml"
    path.write_text(yaml.safe_dump({"run": "x", "service": {"replicas": 1}, "resources": {"infra": "local"}}))
    result = CliRunner().invoke(app, ["launch", str(path)], input="n\n")
    assert "used by skyhop serve up (not built yet); launching the task" in result.output
    assert "Considered resources" in result.output


def test_the_service_section_is_typed_in_its_canonical_form() -> None:
    from skyhop.spec import Service

    fixed = Service.model_validate(
        {"readiness_probe": "/health", "replicas": 2, "load_balancing_policy": "ROUND_ROBIN"}
    )
    assert (fixed.readiness_probe.path, fixed.readiness_probe.initial_delay_seconds) == ("/health", 1200.0)
    assert (fixed.replica_policy.min_replicas, fixed.replica_policy.max_replicas) == (2, 2)
    assert fixed.load_balancing_policy == "round_robin"
    scaled = Service.model_validate(
        {
            "readiness_probe": {"path": "/v1/models", "post_data": {"model": "m"}, "headers": {"A": "b"}},
            "replica_policy": {"min_replicas": 1, "max_replicas": 4, "target_qps_per_replica": {"H100": 5}},
            "ports": 8080,
        }
    )
    assert scaled.replica_policy.target_qps_per_replica == {"H100": 5.0} and scaled.ports == 8080
    pool = Service.model_validate({"pool": {"workers": 3}})
    assert pool.pool is not None and pool.pool.workers == 3
