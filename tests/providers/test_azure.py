"""The azure provider through azure-mgmt-compute/-network/-resource against a local Resource Manager."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from skyhop.providers.azure.api import ArmApi
from skyhop.providers.azure.provider import AzureProvider
from skyhop.providers.base import ClusterHandle, NodeStatus, Offering, ProvisionRequest
from skyhop.providers.errors import (
    CapacityError,
    CredentialsError,
    FailureScope,
    InvalidRequestError,
    NotOfferedHereError,
    ProviderError,
    QuotaError,
)
from skyhop.workflows.failover import block_for
from tests.conftest import run
from tests.providers.fake_azure import FakeAzure, PutFault

SUBSCRIPTION = "00000000-0000-0000-0000-00000000beef"


@pytest.fixture
def azure(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeAzure]:
    fake = FakeAzure(SUBSCRIPTION)
    monkeypatch.setenv("SKYHOP_AZURE_ENDPOINT", fake.start())
    monkeypatch.setenv("AZURE_SUBSCRIPTION_ID", SUBSCRIPTION)
    monkeypatch.setenv("AZURE_CONFIG_DIR", str(tmp_path / "azure"))
    monkeypatch.setattr(ArmApi, "polling_interval_s", 0.01)
    yield fake
    fake.stop()
    assert fake.violations == []


def _provider() -> AzureProvider:
    provider = AzureProvider()
    provider.poll_interval_s = 0.01
    return provider


def _request(region: str = "eastus", nodes: int = 2, **extra: Any) -> ProvisionRequest:
    offering = Offering(
        provider="azure",
        instance_type="Standard_NC4as_T4_v3",
        cpus=4,
        memory_gib=28,
        accelerators={"T4": 1},
        region=region,
        price=0.526,
    )
    fields: dict[str, Any] = {"cluster_name": "train", "num_nodes": nodes, "attempt_id": "a1", **extra}
    return ProvisionRequest(offering=offering, **fields)


def test_launch_creates_tagged_spot_vms_once_with_ports_open(azure: FakeAzure) -> None:
    request = _request(use_spot=True, ports=["8000-8010"], disk_size=200)
    handle = run(_provider().launch(request))
    again = run(_provider().launch(request))
    assert [n.instance_id for n in again.nodes] == [n.instance_id for n in handle.nodes]
    assert [n.instance_id.rpartition("/")[2] for n in handle.nodes] == ["train-0", "train-1"]
    puts = azure.called("PUT", "/virtualMachines/")
    assert len(puts) == 2 and len(azure.vms()) == 2
    body = puts[0].body
    assert body["location"] == "eastus"
    assert body["tags"] == {"skyhop-cluster": "train", "skyhop-node-rank": "0"}
    properties = body["properties"]
    assert (properties["priority"], properties["evictionPolicy"], properties["billingProfile"]) == (
        "Spot",
        "Delete",
        {"maxPrice": -1},
    )
    assert properties["hardwareProfile"] == {"vmSize": "Standard_NC4as_T4_v3"}
    assert properties["storageProfile"]["osDisk"]["diskSizeGB"] == 200
    assert properties["osProfile"]["adminUsername"] == "skyhop"
    assert "api-version" in puts[0].query
    assert [n.access.public_ip for n in handle.nodes] == [
        "20.0.0." + n.ip.rpartition(".")[2] for n in handle.nodes
    ]
    group = azure.groups["skyhop-train-eastus"]
    assert group["location"] == "eastus"
    nsg = azure.resources[
        f"{group['id']}/providers/Microsoft.Network/networkSecurityGroups/skyhop-nsg".lower()
    ]
    assert [r["properties"]["destinationPortRange"] for r in nsg["properties"]["securityRules"]] == [
        "22",
        "8000-8010",
    ]

    run(_provider().open_ports(handle, ["443"]))
    assert [r["properties"]["priority"] for r in nsg_rules(azure, group)] == [1000, 1001, 1002]
    run(_provider().terminate(handle))
    assert azure.vms() == [] and azure.groups == {} and azure.resources == {}


def nsg_rules(azure: FakeAzure, group: dict[str, Any]) -> list[dict[str, Any]]:
    nsg = azure.resources[
        f"{group['id']}/providers/Microsoft.Network/networkSecurityGroups/skyhop-nsg".lower()
    ]
    rules: list[dict[str, Any]] = nsg["properties"]["securityRules"]
    return rules


def test_allocation_failure_blocks_the_region_and_the_next_region_succeeds(azure: FakeAzure) -> None:
    azure.async_faults["eastus"] = PutFault.ALLOCATION_FAILED
    failed_request = _request("eastus")
    with pytest.raises(CapacityError) as failed:
        run(_provider().launch(failed_request))
    assert failed.value.code == "AllocationFailed" and "sufficient capacity" in failed.value.message
    assert failed.value.leftover is True  # the failed VMs' NICs stay until the group is removed
    blocked = block_for(failed_request.offering, failed.value.scope)
    assert blocked is not None and (blocked.provider, blocked.region, blocked.zone) == (
        "azure",
        "eastus",
        None,
    )
    assert {vm["properties"]["provisioningState"] for vm in azure.vms()} == {"Failed"}
    # The workflow's compensation removes what the failed attempt left, then tries the next region.
    run(
        _provider().terminate(ClusterHandle(cluster_name="train", offering=failed_request.offering, nodes=[]))
    )
    assert azure.groups == {} and azure.resources == {}
    handle = run(_provider().launch(_request("westus2")))
    assert {vm["location"] for vm in azure.vms()} == {"westus2"} and len(handle.nodes) == 2


@pytest.mark.parametrize(
    ("fault", "error", "scope"),
    [
        (PutFault.SKU_NOT_AVAILABLE, NotOfferedHereError, FailureScope.ZONE),
        (PutFault.QUOTA, QuotaError, FailureScope.REGION),
        (PutFault.LOW_PRIORITY_QUOTA, QuotaError, FailureScope.REGION),
        (PutFault.FORBIDDEN, CredentialsError, FailureScope.PROVIDER),
        (
            (400, "InvalidParameter", "The value of parameter imageReference is invalid."),
            InvalidRequestError,
            FailureScope.FATAL,
        ),
    ],
)
def test_put_errors_are_classified(
    azure: FakeAzure, fault: tuple[int, str, str], error: type[ProviderError], scope: FailureScope
) -> None:
    azure.put_faults["eastus"] = fault
    with pytest.raises(error) as failed:
        run(_provider().launch(_request(nodes=1)))
    assert failed.value.scope == scope and failed.value.code == fault[1]
    assert azure.vms() == []


def test_transient_errors_are_retried_by_the_sdk(azure: FakeAzure) -> None:
    azure.transient_list_failures = 1
    handle = run(_provider().launch(_request(nodes=1)))
    assert azure.transient_list_failures == 0 and len(azure.vms()) == 1
    run(_provider().terminate(handle))


def test_stop_deallocates_and_start_brings_the_same_vm_back(azure: FakeAzure) -> None:
    provider = _provider()
    handle = run(provider.launch(_request(nodes=1)))
    run(provider.stop(handle))
    assert azure.called("POST", "/train-0/deallocate")
    assert run(provider.node_statuses(handle)) == [NodeStatus.STOPPED]
    started = run(provider.start(handle))
    assert azure.called("POST", "/train-0/start") and started.head.instance_id == handle.head.instance_id
    assert run(provider.node_statuses(handle)) == [NodeStatus.UP]
    run(provider.terminate(handle))
    assert run(provider.node_statuses(handle)) == [NodeStatus.TERMINATED]


def test_an_evicted_spot_vm_is_preempted_and_a_deleted_one_is_not(azure: FakeAzure) -> None:
    provider = _provider()
    handle = run(provider.launch(_request(use_spot=True)))
    azure.evict("skyhop-train-eastus", "train-0")
    assert run(provider.node_statuses(handle)) == [NodeStatus.PREEMPTED, NodeStatus.UP]
    run(provider.terminate(handle))
    assert run(provider.node_statuses(handle)) == [NodeStatus.PREEMPTED, NodeStatus.TERMINATED]


def test_a_bad_image_is_refused_before_any_call(azure: FakeAzure) -> None:
    with pytest.raises(InvalidRequestError, match="publisher:offer:sku:version"):
        run(_provider().launch(_request(image_id="ubuntu")))
    assert azure.vms() == []


def test_check(azure: FakeAzure, monkeypatch: pytest.MonkeyPatch) -> None:
    result = run(AzureProvider().check())
    assert result.enabled and result.reason == f"subscription {SUBSCRIPTION} at {azure.url}"
    monkeypatch.delenv("AZURE_SUBSCRIPTION_ID")
    assert run(AzureProvider().check()).reason == "NoSubscription: no Azure subscription is set"
    monkeypatch.setenv("AZURE_SUBSCRIPTION_ID", SUBSCRIPTION)
    monkeypatch.delenv("SKYHOP_AZURE_ENDPOINT")
    for name in (
        "AZURE_CLIENT_ID",
        "AZURE_TENANT_ID",
        "AZURE_CLIENT_SECRET",
        "IDENTITY_ENDPOINT",
        "MSI_ENDPOINT",
    ):
        monkeypatch.delenv(name, raising=False)
    missing = run(AzureProvider().check())
    assert not missing.enabled and "az login" in missing.hint
    assert missing.reason.startswith("ClientAuthenticationError: DefaultAzureCredential failed")
    assert "\n" not in missing.reason


def test_disk_tier_network_tier_and_labels_reach_the_vm_body(azure: FakeAzure) -> None:
    from skyhop.providers.base import DiskTier, NetworkTier

    request = _request(nodes=1, disk_tier=DiskTier.BEST, network_tier=NetworkTier.BEST, labels={"team": "ml"})
    handle = run(_provider().launch(request))
    body = azure.called("PUT", "/virtualMachines/")[0].body
    os_disk = body["properties"]["storageProfile"]["osDisk"]
    assert os_disk["managedDisk"] == {"storageAccountType": "Premium_LRS"}
    nic = body["properties"]["networkProfile"]["networkInterfaceConfigurations"][0]["properties"]
    assert nic["enableAcceleratedNetworking"] is True
    assert body["tags"] == {"team": "ml", "skyhop-cluster": "train", "skyhop-node-rank": "0"}
    run(_provider().terminate(handle))
