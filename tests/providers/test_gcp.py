"""The gcp provider through google-cloud-compute against a local Compute Engine that checks every request."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from skyhop.providers.base import ClusterHandle, NodeStatus, Offering, ProvisionRequest
from skyhop.providers.errors import (
    CapacityError,
    CredentialsError,
    FailureScope,
    InvalidRequestError,
    ProviderError,
    ProviderUnavailableError,
    QuotaError,
)
from skyhop.providers.gcp.provider import GCPProvider
from skyhop.workflows.failover import block_for
from tests.conftest import run
from tests.providers.fake_gcp import FakeGCP, OperationFault, signed_in

PROJECT = "skyhop-test"


@pytest.fixture
def gcp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGCP]:
    fake = FakeGCP(PROJECT, tmp_path / "key.json")
    signed_in(fake, tmp_path, monkeypatch, COMPUTE="/compute/v1/")
    yield fake
    fake.stop()
    assert fake.violations == []


def _provider() -> GCPProvider:
    provider = GCPProvider()
    provider.poll_interval_s = 0.01
    return provider


def _request(
    zone: str = "us-central1-a", nodes: int = 2, gpu: bool = False, **extra: object
) -> ProvisionRequest:
    offering = Offering(
        provider="gcp",
        instance_type="n1-standard-8" if gpu else "e2-standard-2",
        cpus=8 if gpu else 2,
        memory_gib=30 if gpu else 8,
        accelerators={"T4": 1} if gpu else {},
        region=zone.rsplit("-", 1)[0],
        zone=zone,
        price=0.73,
    )
    fields: dict[str, Any] = {"cluster_name": "train", "num_nodes": nodes, "attempt_id": "a1", **extra}
    return ProvisionRequest(offering=offering, **fields)


def test_launch_creates_labelled_spot_gpu_nodes_once_with_ports_open(gcp: FakeGCP) -> None:
    request = _request(gpu=True, use_spot=True, ports=["8000-8010", "443"], disk_size=100)
    handle = run(_provider().launch(request))
    again = run(_provider().launch(request))
    assert (
        [n.instance_id for n in again.nodes]
        == [n.instance_id for n in handle.nodes]
        == ["train-0", "train-1"]
    )
    inserts = gcp.called("POST", "/instances")
    assert len(inserts) == 2 and len(gcp.instances) == 2
    body = inserts[0].body
    assert body["scheduling"] == {
        "provisioningModel": "SPOT",
        "instanceTerminationAction": "DELETE",
        "onHostMaintenance": "TERMINATE",
        "automaticRestart": False,
    }
    assert body["guestAccelerators"] == [
        {
            "acceleratorType": f"projects/{PROJECT}/zones/us-central1-a/acceleratorTypes/nvidia-tesla-t4",
            "acceleratorCount": 1,
        }
    ]
    assert body["disks"][0]["initializeParams"]["diskSizeGb"] == "100"
    assert body["labels"] == {"skyhop-cluster": "train", "skyhop-node-rank": "0"}
    assert body["tags"] == {"items": ["skyhop-train"]}
    assert [n.access.public_ip for n in handle.nodes] == [
        i["networkInterfaces"][0]["accessConfigs"][0]["natIP"] for i in gcp.instances.values()
    ]
    assert {(n.access.kind, n.access.user) for n in handle.nodes} == {("ssh", "skyhop")}
    assert gcp.firewalls["skyhop-train"]["allowed"] == [
        {"IPProtocol": "tcp", "ports": ["22", "8000-8010", "443"]}
    ]

    run(_provider().open_ports(handle, ["9000"]))
    assert gcp.firewalls["skyhop-train"]["allowed"][0]["ports"] == ["22", "8000-8010", "443", "9000"]
    run(_provider().terminate(handle))
    assert gcp.instances == {} and gcp.firewalls == {}


def test_a_retried_insert_reuses_its_request_id_and_creates_nothing_new(gcp: FakeGCP) -> None:
    request = _request(nodes=2)
    provider = _provider()
    run(provider.create_instances(request, [0, 1]))
    run(provider.create_instances(request, [0, 1]))  # the activity retried after its calls went out
    ids = [c.query["requestId"] for c in gcp.called("POST", "/instances")]
    assert len(ids) == 4 and ids[:2] == ids[2:] and ids[0] != ids[1]
    assert sorted(name for _, name in gcp.instances) == ["train-0", "train-1"]
    other_attempt = request.model_copy(update={"attempt_id": "a2"})
    run(provider.create_instances(other_attempt, [1]))  # alreadyExists: found by its labels instead
    assert len(gcp.instances) == 2


def test_exhausted_zone_blocks_only_that_zone_and_the_next_zone_succeeds(gcp: FakeGCP) -> None:
    gcp.zone_faults["us-central1-a"] = OperationFault.POOL_EXHAUSTED
    failed_request = _request("us-central1-a")
    with pytest.raises(CapacityError) as failed:
        run(_provider().launch(failed_request))
    assert failed.value.code == "ZONE_RESOURCE_POOL_EXHAUSTED" and failed.value.leftover is False
    assert "does not have enough resources" in failed.value.message
    blocked = block_for(failed_request.offering, failed.value.scope)
    assert blocked is not None and (blocked.region, blocked.zone) == ("us-central1", "us-central1-a")
    assert gcp.instances == {}
    handle = run(_provider().launch(_request("us-central1-b")))
    assert {zone for zone, _ in gcp.instances} == {"us-central1-b"}
    run(_provider().terminate(handle))
    assert gcp.instances == {}


def test_a_partial_multi_node_attempt_fails_as_capacity_and_compensation_removes_it(gcp: FakeGCP) -> None:
    gcp.zone_faults["us-central1-a"] = OperationFault.POOL_EXHAUSTED
    gcp.fault_after = 1
    request = _request(nodes=3)
    with pytest.raises(CapacityError) as failed:
        run(_provider().launch(request))
    assert failed.value.leftover is True and [name for _, name in gcp.instances] == ["train-0"]
    run(_provider().terminate(ClusterHandle(cluster_name="train", offering=request.offering, nodes=[])))
    assert gcp.instances == {} and gcp.firewalls == {}


@pytest.mark.parametrize(
    ("fault", "error", "scope"),
    [
        (OperationFault.QUOTA, QuotaError, FailureScope.REGION),
        (OperationFault.GPU_QUOTA, ProviderUnavailableError, FailureScope.PROVIDER),
        (
            (403, "quotaExceeded", "Quota 'CPUS' exceeded.  Limit: 8.0 in region us-central1."),
            QuotaError,
            FailureScope.REGION,
        ),
        (
            (403, "forbidden", "Required 'compute.instances.create' permission"),
            CredentialsError,
            FailureScope.PROVIDER,
        ),
        (
            (400, "invalid", "Invalid value for field 'resource.machineType'"),
            InvalidRequestError,
            FailureScope.FATAL,
        ),
        (
            (404, "notFound", "The resource 'projects/x/zones/z/acceleratorTypes/y' was not found"),
            CapacityError,
            FailureScope.ZONE,
        ),
    ],
)
def test_quota_permission_and_request_errors_are_scoped(
    gcp: FakeGCP, fault: tuple[object, ...], error: type[ProviderError], scope: FailureScope
) -> None:
    if isinstance(fault[0], str):
        gcp.zone_faults["us-central1-a"] = fault  # type: ignore[assignment]
    else:
        gcp.insert_http_errors["us-central1-a"] = fault  # type: ignore[assignment]
    with pytest.raises(error) as failed:
        run(_provider().launch(_request(gpu=True)))
    assert failed.value.scope == scope
    assert gcp.instances == {}


def test_transient_errors_are_retried_by_the_sdk(gcp: FakeGCP) -> None:
    gcp.transient_list_failures = 2
    handle = run(_provider().launch(_request(nodes=1)))
    assert gcp.transient_list_failures == 0 and len(gcp.instances) == 1
    run(_provider().terminate(handle))


def test_stop_start_and_statuses(gcp: FakeGCP) -> None:
    provider = _provider()
    handle = run(provider.launch(_request(nodes=1)))
    run(provider.stop(handle))
    assert gcp.called("POST", "/train-0/stop")
    assert run(provider.node_statuses(handle)) == [NodeStatus.STOPPED]
    started = run(provider.start(handle))
    assert gcp.called("POST", "/train-0/start") and started.head.instance_id == "train-0"
    assert run(provider.node_statuses(handle)) == [NodeStatus.UP]
    run(provider.terminate(handle))
    assert run(provider.node_statuses(handle)) == [NodeStatus.TERMINATED]


def test_a_preempted_spot_node_is_preempted_and_a_deleted_one_is_not(gcp: FakeGCP) -> None:
    provider = _provider()
    handle = run(provider.launch(_request(use_spot=True)))
    gcp.preempt("us-central1-a", "train-0")
    assert run(provider.node_statuses(handle)) == [NodeStatus.PREEMPTED, NodeStatus.UP]
    run(provider.terminate(handle))
    assert run(provider.node_statuses(handle)) == [NodeStatus.PREEMPTED, NodeStatus.TERMINATED]


def test_check_uses_the_application_default_credentials(
    gcp: FakeGCP, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run(GCPProvider().check())
    assert result.enabled, result
    assert result.reason == f"project {PROJECT} as skyhop-test@{PROJECT}.iam.gserviceaccount.com"
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS")
    missing = run(GCPProvider().check())
    assert not missing.enabled and "gcloud auth application-default login" in missing.hint
    assert missing.reason.startswith("DefaultCredentialsError")


def test_disk_tier_network_tier_and_labels_reach_the_insert_body(gcp: FakeGCP) -> None:
    from skyhop.providers.base import DiskTier, NetworkTier

    request = _request(nodes=1, disk_tier=DiskTier.HIGH, network_tier=NetworkTier.BEST, labels={"team": "ml"})
    handle = run(_provider().launch(request))
    body = gcp.called("POST", "/instances")[0].body
    assert body["disks"][0]["initializeParams"]["diskType"].endswith("/diskTypes/pd-ssd")
    assert body["networkInterfaces"][0]["nicType"] == "GVNIC"
    assert body["labels"] == {"team": "ml", "skyhop-cluster": "train", "skyhop-node-rank": "0"}
    run(_provider().terminate(handle))


def test_the_tasks_config_gcp_enable_gvnic_reaches_the_insert_body(gcp: FakeGCP) -> None:
    from skyhop.providers.overrides import GcpOverrides, ProviderOverrides

    plain = run(_provider().launch(_request(nodes=1)))
    assert "nicType" not in gcp.called("POST", "/instances")[0].body["networkInterfaces"][0]
    run(_provider().terminate(plain))
    overrides = ProviderOverrides(gcp=GcpOverrides(enable_gvnic=True))
    handle = run(_provider().launch(_request(nodes=1, overrides=overrides, attempt_id="gvnic")))
    assert gcp.called("POST", "/instances")[-1].body["networkInterfaces"][0]["nicType"] == "GVNIC"
    run(_provider().terminate(handle))
