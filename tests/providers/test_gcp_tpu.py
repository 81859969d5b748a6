"""TPU VMs through the gcp provider against a local Cloud TPU API that checks every request."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from skyhop.providers.base import AcceleratorArgs, CannotStopError, NodeStatus, Offering, ProvisionRequest
from skyhop.providers.errors import CapacityError, CredentialsError, QuotaError
from skyhop.providers.gcp.errors import classify_rpc
from skyhop.providers.gcp.provider import GCPProvider
from skyhop.providers.gcp.tpu_api import TpuApi
from skyhop.workflows.failover import block_for
from tests.conftest import run
from tests.providers.fake_gcp import signed_in
from tests.providers.fake_tpu import FakeGCPWithTPU, TpuFault

PROJECT = "skyhop-test"


@pytest.fixture
def tpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGCPWithTPU]:
    fake = FakeGCPWithTPU(PROJECT, tmp_path / "key.json")
    signed_in(fake, tmp_path, monkeypatch, COMPUTE="/compute/v1/", TPU="/")
    monkeypatch.setattr(TpuApi, "operation_poll_s", 0.01)
    yield fake
    fake.stop()
    assert fake.violations == []


def _provider() -> GCPProvider:
    provider = GCPProvider()
    provider.tpus.poll_interval_s = 0.01
    return provider


def _request(zone: str = "us-central1-b", nodes: int = 1, **extra: Any) -> ProvisionRequest:
    offering = Offering(
        provider="gcp",
        instance_type="tpu-v2-8",
        cpus=96,
        memory_gib=334,
        accelerators={"tpu-v2-8": 1},
        region=zone.rsplit("-", 1)[0],
        zone=zone,
        price=4.5,
        spot_price=1.35,
    )
    fields: dict[str, Any] = {"cluster_name": "jax", "num_nodes": nodes, "attempt_id": "a1", **extra}
    return ProvisionRequest(offering=offering, **fields)


def test_a_tpu_vm_is_created_once_ready_reached_over_ssh_and_deleted_on_down(tpu: FakeGCPWithTPU) -> None:
    args = AcceleratorArgs(runtime_version="tpu-vm-base", tpu_name="my-tpu")
    request = _request(use_spot=True, ports=["8888"], labels={"team": "ml"}, accelerator_args=args)
    handle = run(_provider().launch(request))
    again = run(_provider().launch(request))  # a retried activity: found by its labels, nothing new
    assert [n.instance_id for n in handle.nodes] == [n.instance_id for n in again.nodes] == ["my-tpu"]
    (create,) = tpu.called("POST", "/nodes")
    assert create.path == f"/v2/projects/{PROJECT}/locations/us-central1-b/nodes"
    assert create.query == {"nodeId": "my-tpu"}
    body = create.body
    assert (body["acceleratorType"], body["runtimeVersion"]) == ("v2-8", "tpu-vm-base")
    assert body["schedulingConfig"] == {"spot": True}
    assert body["labels"] == {"team": "ml", "skyhop-cluster": "jax", "skyhop-node-rank": "0"}
    assert body["tags"] == ["skyhop-jax"] and body["metadata"]["ssh-keys"].startswith("skyhop:ssh-ed25519 ")
    node = tpu.nodes[("us-central1-b", "my-tpu")]
    assert node["state"] == "READY"
    endpoint = node["networkEndpoints"][0]
    (head,) = handle.nodes
    assert (head.ip, head.access.public_ip) == (endpoint["ipAddress"], endpoint["accessConfig"]["externalIp"])
    assert (head.access.kind, head.access.user) == ("ssh", "skyhop")
    assert tpu.firewalls["skyhop-jax"]["allowed"] == [{"IPProtocol": "tcp", "ports": ["22", "8888"]}]
    assert run(_provider().node_statuses(handle)) == [NodeStatus.UP]
    with pytest.raises(CannotStopError):
        run(_provider().stop(handle))

    run(_provider().terminate(handle))
    assert tpu.nodes == {} and tpu.firewalls == {}
    (delete,) = tpu.called("DELETE", "/nodes/")
    assert delete.path == f"/v2/projects/{PROJECT}/locations/us-central1-b/nodes/my-tpu"


def test_each_rank_is_a_tpu_vm_named_after_the_cluster_with_the_slices_base_runtime(
    tpu: FakeGCPWithTPU,
) -> None:
    request = _request(nodes=3).model_copy(
        update={"offering": _request().offering.model_copy(update={"instance_type": "tpu-v6e-8"})}
    )
    handle = run(_provider().launch(request))
    assert [n.instance_id for n in handle.nodes] == ["jax-0", "jax-1", "jax-2"]
    assert [n.rank for n in handle.nodes] == [0, 1, 2]
    bodies = [c.body for c in tpu.called("POST", "/nodes")]
    assert {(b["acceleratorType"], b["runtimeVersion"]) for b in bodies} == {("v6e-8", "v2-alpha-tpuv6e")}
    assert "schedulingConfig" not in bodies[0]
    assert len(tpu.called("GET", "/locations/-/nodes")) >= 2  # listed across pages (two nodes a page)
    run(_provider().terminate(handle))
    assert tpu.nodes == {}


def test_failover_an_exhausted_zone_blocks_that_zone_and_the_next_zone_succeeds(tpu: FakeGCPWithTPU) -> None:
    tpu.tpu_faults["us-central1-b"] = TpuFault.NO_CAPACITY
    failed_request = _request("us-central1-b")
    with pytest.raises(CapacityError) as failed:
        run(_provider().launch(failed_request))
    assert failed.value.code == "RESOURCE_EXHAUSTED" and "no more capacity" in failed.value.message
    blocked = block_for(failed_request.offering, failed.value.scope)
    assert blocked is not None and (blocked.region, blocked.zone) == ("us-central1", "us-central1-b")
    assert tpu.nodes == {}

    handle = run(_provider().launch(_request("us-central1-c")))
    assert set(tpu.nodes) == {("us-central1-c", "jax-0")}
    run(_provider().terminate(handle))
    assert tpu.nodes == {} and len(tpu.called("DELETE", "/nodes/jax-0")) == 1


@pytest.mark.parametrize(
    ("fault", "error", "scope"),
    [(TpuFault.QUOTA, QuotaError, "region"), (TpuFault.DENIED, CredentialsError, "provider")],
)
def test_quota_and_permission_errors_of_the_create_call_are_scoped(
    tpu: FakeGCPWithTPU, fault: tuple[str, str, int, str], error: type, scope: str
) -> None:
    tpu.tpu_faults["us-central1-b"] = fault
    with pytest.raises(error) as failed:
        run(_provider().launch(_request()))
    assert failed.value.scope == scope and failed.value.leftover is False
    assert tpu.nodes == {}


def test_a_preempted_spot_tpu_reads_preempted_and_a_relaunch_replaces_it(tpu: FakeGCPWithTPU) -> None:
    request = _request(use_spot=True)
    handle = run(_provider().launch(request))
    tpu.preempt_tpu("us-central1-b", "jax-0")
    assert run(_provider().node_statuses(handle)) == [NodeStatus.PREEMPTED]
    again = run(_provider().launch(request.model_copy(update={"attempt_id": "a2"})))
    assert [n.instance_id for n in again.nodes] == ["jax-0"]
    assert tpu.nodes[("us-central1-b", "jax-0")]["state"] == "READY"
    assert len(tpu.called("DELETE", "/nodes/jax-0")) == 1  # the preempted one, in the way of the new one
    tpu.preempt_tpu("us-central1-b", "jax-0")
    assert run(_provider().remove_untracked("jax")) == ["jax-0"]  # preempted ones are removed too
    assert tpu.nodes == {}


def test_a_project_without_the_tpu_api_still_removes_its_instances(tpu: FakeGCPWithTPU) -> None:
    tpu.tpu_disabled = True
    assert run(_provider().remove_untracked("jax")) == []
    with pytest.raises(CredentialsError) as failed:
        run(_provider().launch(_request()))
    assert failed.value.code == "SERVICE_DISABLED"


@pytest.mark.parametrize(
    ("code", "message", "error"),
    [
        (8, 'There is no more capacity in the zone "us-central1-b"', CapacityError),
        ("RESOURCE_EXHAUSTED", "Quota limit 'TPUV2s' has been exceeded", QuotaError),
        ("RESOURCE_EXHAUSTED", "Quota exceeded for quota metric 'Requests' per minute", None),
        (9, "The runtime is not ready", CapacityError),
        (3, "Accelerator type v5p-8 is not available in zone us-west1-a", CapacityError),
        (7, "Permission denied", CredentialsError),
    ],
)
def test_rpc_errors_map_to_failover_scopes(code: str | int, message: str, error: type | None) -> None:
    classified = classify_rpc(code, message)
    assert classified.message == message
    if error is None:
        assert classified.scope == "transient"
    else:
        assert isinstance(classified, error)
