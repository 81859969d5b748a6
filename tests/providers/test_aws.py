"""The aws provider through boto3 against moto's server: lifecycle, idempotency, error classification."""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest

from skyhop.providers.aws import AWSProvider
from skyhop.providers.base import ClusterHandle, NodeStatus, Offering, ProvisionRequest
from skyhop.providers.cloud import RANK_TAG
from skyhop.providers.errors import CapacityError, CredentialsError
from tests.conftest import run
from tests.providers.aws_support import MotoFaults, aws_instances, reclaim_spot


def _request(zone: str = "us-east-1a", nodes: int = 2, **extra: object) -> ProvisionRequest:
    offering = Offering(
        provider="aws",
        instance_type="m6i.large",
        cpus=2,
        memory_gib=8,
        region="us-east-1",
        zone=zone,
        price=0.096,
    )
    return ProvisionRequest(cluster_name="web", offering=offering, num_nodes=nodes, attempt_id="a1", **extra)  # type: ignore[arg-type]


def test_launch_creates_tagged_spot_nodes_once_with_ports_open(faults: MotoFaults) -> None:
    provider = AWSProvider()
    request = _request(use_spot=True, ports=["8000-8010", "443"], disk_size=100)
    handle = run(provider.launch(request))
    again = run(AWSProvider().launch(request))
    assert [n.instance_id for n in again.nodes] == [n.instance_id for n in handle.nodes]
    instances = sorted(aws_instances(cluster="web"), key=lambda i: i["InstanceId"])
    assert len(instances) == 2 and faults.calls == 2
    assert {i["InstanceLifecycle"] for i in instances} == {"spot"}
    assert {i["Placement"]["AvailabilityZone"] for i in instances} == {"us-east-1a"}
    ranks = sorted(int(next(t["Value"] for t in i["Tags"] if t["Key"] == RANK_TAG)) for i in instances)
    assert ranks == [0, 1]
    assert [(n.access.kind, n.access.user) for n in handle.nodes] == [("ssh", "ubuntu")] * 2

    ec2 = boto3.session.Session().client("ec2", region_name="us-east-1")
    group = ec2.describe_security_groups(Filters=[{"Name": "group-name", "Values": ["skyhop-web"]}])
    opened = {(p["FromPort"], p["ToPort"]) for p in group["SecurityGroups"][0]["IpPermissions"]}
    assert opened == {(22, 22), (8000, 8010), (443, 443)}
    assert len(ec2.describe_key_pairs()["KeyPairs"]) == 1
    volumes = ec2.describe_volumes()["Volumes"]
    assert 100 in {v["Size"] for v in volumes}

    run(provider.terminate(handle))
    assert aws_instances(cluster="web") == []
    assert not ec2.describe_security_groups(Filters=[{"Name": "group-name", "Values": ["skyhop-web"]}])[
        "SecurityGroups"
    ]


def test_capacity_error_is_classified_and_blocks_only_that_zone(faults: MotoFaults) -> None:
    faults.full_zones.add("us-east-1a")
    provider = AWSProvider()
    with pytest.raises(CapacityError) as failed:
        run(provider.launch(_request("us-east-1a")))
    assert failed.value.code == "InsufficientInstanceCapacity"
    assert failed.value.scope.value == "zone" and failed.value.leftover is False
    assert aws_instances(cluster="web") == []
    handle = run(provider.launch(_request("us-east-1b")))
    assert len(aws_instances(cluster="web")) == 2
    run(provider.terminate(handle))


def test_stop_start_and_statuses(faults: MotoFaults) -> None:
    provider = AWSProvider()
    handle = run(provider.launch(_request(nodes=1)))
    run(provider.stop(handle))
    assert run(provider.node_statuses(handle)) == [NodeStatus.STOPPED]
    started = run(provider.start(handle))
    assert started.head.instance_id == handle.head.instance_id
    assert run(provider.node_statuses(handle)) == [NodeStatus.UP]
    run(provider.terminate(handle))
    assert run(provider.node_statuses(handle)) == [NodeStatus.TERMINATED]


def test_a_reclaimed_spot_node_is_preempted_and_a_terminated_one_is_not(faults: MotoFaults) -> None:
    provider = AWSProvider()
    handle = run(provider.launch(_request(use_spot=True)))
    reclaim_spot(handle.nodes[0].instance_id)
    assert run(provider.node_statuses(handle)) == [NodeStatus.PREEMPTED, NodeStatus.UP]
    boto3.session.Session().client("ec2", region_name="us-east-1").terminate_instances(
        InstanceIds=[handle.nodes[1].instance_id]
    )
    assert run(provider.node_statuses(handle)) == [NodeStatus.PREEMPTED, NodeStatus.TERMINATED]
    run(provider.terminate(handle))


@pytest.mark.parametrize("use_spot", [True, False])
def test_nodes_terminated_through_the_ec2_api_read_as_gone_so_a_managed_job_recovers(
    faults: MotoFaults, use_spot: bool
) -> None:
    """Terminated behind skyhop's back (the console, another tool): gone, never UP, also while
    EC2 still reports the instance as shutting down."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.ec2.models import ec2_backends

    provider = AWSProvider()
    handle = run(provider.launch(_request(use_spot=use_spot)))
    ids = [n.instance_id for n in handle.nodes]
    boto3.session.Session().client("ec2", region_name="us-east-1").terminate_instances(InstanceIds=ids)
    shutting_down = ec2_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].get_instance(ids[1])
    shutting_down._state.name, shutting_down._state.code = "shutting-down", 32
    statuses = run(provider.node_statuses(handle))
    assert statuses == [NodeStatus.TERMINATED, NodeStatus.TERMINATED]
    assert all(status.gone for status in statuses)
    shutting_down._state.name, shutting_down._state.code = "terminated", 48  # moto never finishes it
    run(provider.terminate(handle))


def test_check_finds_and_uses_the_credentials(faults: MotoFaults, monkeypatch: pytest.MonkeyPatch) -> None:
    result = run(AWSProvider().check())
    assert result.enabled and "authenticated as arn:aws" in result.reason
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.delenv("AWS_ACCESS_KEY_ID", raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    missing = run(AWSProvider().check())
    assert not missing.enabled and "aws configure" in missing.hint


def test_missing_credentials_classify_as_credentials_error(
    faults: MotoFaults, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    handle = ClusterHandle(cluster_name="web", offering=_request().offering, nodes=[])
    with pytest.raises(CredentialsError):
        run(AWSProvider().terminate(handle))


@pytest.mark.parametrize(("tier", "volume_type", "iops"), [("low", "standard", None), ("high", "gp3", 7000)])
def test_a_tasks_disk_tier_and_labels_reach_the_volume_and_the_instance_tags(
    faults: MotoFaults, tier: str, volume_type: str, iops: int | None
) -> None:
    from skyhop.optimizer import optimize
    from skyhop.spec import task_from_dict

    resources = {"infra": "aws/us-east-1", "instance_type": "m6i.large", "disk_size": "200GB"}
    task = task_from_dict(
        {"run": "x", "resources": {**resources, "disk_tier": tier, "labels": {"team": "ml"}}}, Path.cwd()
    )
    request = optimize(task).choice.request("tiered", 1, "a1")
    handle = run(AWSProvider().launch(request))
    (instance,) = aws_instances(cluster="tiered")
    assert {"Key": "team", "Value": "ml"} in instance["Tags"]
    ec2 = boto3.session.Session().client("ec2", region_name="us-east-1")
    attached = [
        f["Ebs"]["VolumeId"] for f in instance["BlockDeviceMappings"] if f["DeviceName"] == "/dev/sda1"
    ]
    (volume,) = ec2.describe_volumes(VolumeIds=attached)["Volumes"]
    assert (volume["VolumeType"], volume["Size"]) == (volume_type, 200)
    # moto's volumes keep no IOPS given at RunInstances; what it received is checked instead
    (sent,) = faults.block_devices[-1]
    assert sent["Ebs"].get("Iops") == iops
    run(AWSProvider().terminate(handle))
