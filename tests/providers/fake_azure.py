"""A local Azure Resource Manager for contract tests of the ``azure`` provider, checking every request.

It serves what the provider calls, with ARM's documented shapes: resource groups (PUT, list,
DELETE polled through ``Location``), virtual networks and network security groups (GET/PUT), NIC
and public-IP lists, and virtual machines (PUT, list, get, ``instanceView``, deallocate, start,
DELETE), whose long-running operations are polled through ``Azure-AsyncOperation`` URLs, and the
Activity Log (spot evictions: ``evict``). Every request needs ``api-version``; VM and NSG bodies
are checked against ARM's rules (spot needs an eviction policy, NIC and IP declared inline and
deleted with the VM, unique rule priorities).
Faults are ARM's own errors: a 409 ``SkuNotAvailable``/``QuotaExceeded`` on the PUT, or an
operation that fails with ``AllocationFailed``.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

from tests.providers.fake_http import ApiError, Call, FakeApi, Reply

__all__ = ["FakeAzure", "PutFault"]

_S = r"/subscriptions/(?P<sub>[^/]+)"
_RG = _S + r"/(?i:resourcegroups)/(?P<group>[^/]+)"
_NET = _RG + r"/providers/Microsoft.Network"
_VM = _RG + r"/providers/Microsoft.Compute/virtualMachines"
_VM_NAME = re.compile(r"^[a-zA-Z0-9][-a-zA-Z0-9]{0,62}[a-zA-Z0-9]$")


class PutFault:
    """ARM's errors for a VM PUT (status, code, message), as the docs and real replies show them."""

    SKU_NOT_AVAILABLE = (
        409,
        "SkuNotAvailable",
        "The requested VM size for resource 'Following SKUs have failed for Capacity Restrictions: "
        "{size}' is currently not available in location '{region}'. Please try another size or deploy to "
        "a different location or different zone. See https://aka.ms/azureskunotavailable for details.",
    )
    QUOTA = (
        409,
        "OperationNotAllowed",
        "Operation could not be completed as it results in exceeding approved Total Regional Cores "
        "quota. Additional details - Deployment Model: Resource Manager, Location: {region}, Current "
        "Limit: 10, Current Usage: 8, Additional Required: 4, (Minimum) New Limit Required: 12.",
    )
    LOW_PRIORITY_QUOTA = (
        409,
        "QuotaExceeded",
        "Operation could not be completed as it results in exceeding approved LowPriorityCores quota.",
    )
    FORBIDDEN = (
        403,
        "AuthorizationFailed",
        "The client 'x' with object id 'x' does not have authorization to perform action "
        "'Microsoft.Compute/virtualMachines/write' over scope '/subscriptions/{sub}'.",
    )
    ALLOCATION_FAILED = (
        "AllocationFailed",
        "Allocation failed. We do not have sufficient capacity for the requested VM size in this region. "
        "Read more about improving likelihood of allocation success at http://aka.ms/allocation-guidance",
    )


class FakeAzure(FakeApi):
    """Resource Manager for one subscription, in memory."""

    def __init__(self, subscription: str) -> None:
        super().__init__()
        self.subscription = subscription
        self.groups: dict[str, dict[str, Any]] = {}
        self.resources: dict[str, dict[str, Any]] = {}
        """Lowercased resource id -> resource, for everything inside the groups."""
        self.operations: dict[str, dict[str, Any]] = {}
        self.put_faults: dict[str, tuple[int, str, str]] = {}
        """region -> the error a VM PUT there fails with."""
        self.async_faults: dict[str, tuple[str, str]] = {}
        """region -> the error a VM creation there ends with, after the PUT was accepted."""
        self.transient_list_failures = 0
        self.boot_polls = 2
        self._ids = itertools.count(10)
        ops = (
            r"/providers/Microsoft\.(?P<rp>Compute|Network)/locations/(?P<loc>[^/]+)/operations/(?P<op>[^/]+)"
        )
        self.route("GET", _S + ops, self._operation_status)
        self.route("GET", _S + r"/operationresults/(?P<op>[^/]+)", self._operation_result)
        self.route("GET", _S + r"/resourcegroups", self._groups)
        self.route("PUT", _RG, self._group_put)
        self.route("DELETE", _RG, self._group_delete)
        self.route(
            "GET", _NET + r"/(?P<kind>virtualNetworks|networkSecurityGroups)/(?P<name>[^/]+)", self._get
        )
        self.route("PUT", _NET + r"/virtualNetworks/(?P<name>[^/]+)", self._vnet_put)
        self.route("PUT", _NET + r"/networkSecurityGroups/(?P<name>[^/]+)", self._nsg_put)
        self.route("GET", _NET + r"/(?P<kind>networkInterfaces|publicIPAddresses)", self._list)
        self.route("GET", _VM, self._vm_list)
        self.route("PUT", _VM + r"/(?P<name>[^/]+)", self._vm_put)
        self.route("GET", _VM + r"/(?P<name>[^/]+)", self._vm_get)
        self.route("GET", _VM + r"/(?P<name>[^/]+)/instanceView", self._vm_view)
        self.route("POST", _VM + r"/(?P<name>[^/]+)/(?P<verb>deallocate|start)", self._vm_power)
        self.route("DELETE", _VM + r"/(?P<name>[^/]+)", self._vm_delete)
        self.route("GET", _S + r"/providers/Microsoft.Insights/eventtypes/management/values", self._activity)
        self.events: list[dict[str, Any]] = []
        """The subscription's Activity Log, oldest first."""

    def error_body(self, error: ApiError) -> Any:
        return {"error": {"code": error.code, "message": error.message}}

    def dispatch(self, call: Call) -> Reply:
        if not call.query.get("api-version"):
            self.violations.append(f"{call.method} {call.path} without api-version")
        return super().dispatch(call)

    def vms(self) -> list[dict[str, Any]]:
        """Every VM, as a user listing the subscription would see it."""
        return [r for r in self.resources.values() if r["type"] == "Microsoft.Compute/virtualMachines"]

    def evict(self, group: str, name: str) -> None:
        """Evict a spot VM as Azure does with the ``Delete`` policy: an Activity Log event, and the VM
        with its NIC and IP are gone."""
        vm_id = (
            f"/subscriptions/{self.subscription}/resourceGroups/{group}"
            f"/providers/Microsoft.Compute/virtualMachines/{name}"
        )
        vm = self.resources[vm_id.lower()]
        assert vm["properties"].get("priority") == "Spot", "only spot VMs are evicted"
        for owned in [vm_id.lower(), *vm.get("_owned", [])]:
            self.resources.pop(owned, None)
        self.events.append(
            {
                "operationName": {
                    "value": "Microsoft.Compute/virtualMachines/evictSpotVM/action",
                    "localizedValue": "Evict Spot VM",
                },
                "resourceId": vm_id,
                "resourceGroupName": group,
                "status": {"value": "Succeeded", "localizedValue": "Succeeded"},
                "eventTimestamp": "2026-01-01T00:00:00.0000000Z",
            }
        )

    def _activity(self, call: Call) -> Reply:
        """Activity Log events of one resource group: the filter must bound the time and name the group."""
        wanted = re.fullmatch(
            r"eventTimestamp ge '(?P<since>[^']+)' and resourceGroupName eq '(?P<group>[^']+)'",
            call.query.get("$filter", ""),
        )
        self.check(
            wanted is not None, f"activity log filter {call.query.get('$filter')!r} lacks time or group"
        )
        assert wanted is not None
        group = wanted["group"].lower()
        return 200, {"value": [e for e in self.events if e["resourceGroupName"].lower() == group]}

    # -- plumbing ------------------------------------------------------------------------------

    def _id(self, call: Call, kind: str, name: str) -> str:
        group = self._group(call)["name"]
        return f"/subscriptions/{self.subscription}/resourceGroups/{group}/providers/{kind}/{name}"

    def _group(self, call: Call) -> dict[str, Any]:
        if call.match["sub"] != self.subscription:
            raise ApiError(
                404, "SubscriptionNotFound", f"The subscription '{call.match['sub']}' could not be found."
            )
        group = self.groups.get(call.match["group"].lower())
        if group is None:
            raise ApiError(
                404, "ResourceGroupNotFound", f"Resource group '{call.match['group']}' could not be found."
            )
        return group

    def _async(
        self, rp: str, location: str, outcome: str, error: tuple[str, str] | None = None
    ) -> dict[str, str]:
        """Headers of an accepted long-running operation whose first poll says InProgress."""
        name = f"{next(self._ids):08x}-0000-0000-0000-000000000000"
        self.operations[name] = {"polls": 0, "status": outcome, "error": error}
        url = f"{self.url}/subscriptions/{self.subscription}/providers/Microsoft.{rp}/locations/{location}"
        url += f"/operations/{name}?api-version=2024-07-01"
        return {"Azure-AsyncOperation": url, "Location": url + "&monitor=true"}

    def _operation_status(self, call: Call) -> Reply:
        operation = self.operations.get(call.match["op"])
        if operation is None:
            raise ApiError(404, "NotFound", "operation not found", violation=True)
        operation["polls"] += 1
        status = "InProgress" if operation["polls"] == 1 else operation["status"]
        body: dict[str, Any] = {
            "name": call.match["op"],
            "status": status,
            "startTime": "2026-01-01T00:00:00Z",
        }
        if status == "Failed":
            code, message = operation["error"]
            body["error"] = {"code": code, "message": message}
        return 200, body

    # -- resource groups -----------------------------------------------------------------------

    def _groups(self, call: Call) -> Reply:
        return 200, {"value": list(self.groups.values())}

    def _group_put(self, call: Call) -> Reply:
        self.check(call.match["sub"] == self.subscription, "another subscription")
        body = call.body or {}
        self.check(bool(body.get("location")), "a resource group needs a location")
        name = call.match["group"]
        self.check(len(name) <= 90 and re.fullmatch(r"[-\w._()]+", name) is not None, f"group name {name!r}")
        existed = name.lower() in self.groups
        self.groups[name.lower()] = {
            "id": f"/subscriptions/{self.subscription}/resourceGroups/{name}",
            "name": name,
            "type": "Microsoft.Resources/resourceGroups",
            "location": body["location"],
            "tags": body.get("tags", {}),
            "properties": {"provisioningState": "Succeeded"},
        }
        return (200 if existed else 201), self.groups[name.lower()]

    def _group_delete(self, call: Call) -> Reply:
        group = self._group(call)
        prefix = group["id"].lower() + "/"
        for key in [k for k in self.resources if k.startswith(prefix)]:
            del self.resources[key]
        del self.groups[group["name"].lower()]
        name = f"{next(self._ids):08x}"
        self.operations[name] = {"polls": 0}
        url = f"{self.url}/subscriptions/{self.subscription}/operationresults/{name}?api-version=2025-04-01"
        return 202, None, {"Location": url, "Retry-After": "0"}

    def _operation_result(self, call: Call) -> Reply:
        operation = self.operations[call.match["op"]]
        operation["polls"] += 1
        return (202, None) if operation["polls"] == 1 else (200, None)

    # -- network -------------------------------------------------------------------------------

    def _get(self, call: Call) -> Reply:
        kind = f"Microsoft.Network/{call.match['kind']}"
        found = self.resources.get(self._id(call, kind, call.match["name"]).lower())
        if found is None:
            raise ApiError(
                404,
                "ResourceNotFound",
                f"The Resource '{kind}/{call.match['name']}' under resource "
                f"group '{call.match['group']}' was not found.",
            )
        return 200, found

    def _list(self, call: Call) -> Reply:
        group = self._group(call)
        kind = f"Microsoft.Network/{call.match['kind']}".lower()
        prefix = f"{group['id']}/providers/{kind}/".lower()
        return 200, {"value": [r for k, r in self.resources.items() if k.startswith(prefix)]}

    def _store(self, call: Call, kind: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        resource_id = self._id(call, kind, name)
        resource = {**body, "id": resource_id, "name": name, "type": kind}
        resource.setdefault("properties", {})["provisioningState"] = "Succeeded"
        self.resources[resource_id.lower()] = resource
        return resource

    def _vnet_put(self, call: Call) -> Reply:
        body = call.body
        prefixes = body.get("properties", {}).get("addressSpace", {}).get("addressPrefixes", [])
        subnets = body.get("properties", {}).get("subnets", [])
        self.check(bool(prefixes) and bool(subnets), "a virtual network needs an address space and a subnet")
        self.check(
            body.get("location") == self._group(call)["location"], "network outside the group's region"
        )
        resource = self._store(call, "Microsoft.Network/virtualNetworks", call.match["name"], body)
        for subnet in subnets:
            subnet["id"] = f"{resource['id']}/subnets/{subnet['name']}"
        return 201, resource, self._async("Network", body["location"], "Succeeded")

    def _nsg_put(self, call: Call) -> Reply:
        body = call.body
        rules = body.get("properties", {}).get("securityRules", [])
        priorities = [r["properties"].get("priority") for r in rules]
        self.check(len(set(priorities)) == len(priorities), f"rule priorities {priorities} are not unique")
        for rule in rules:
            props = rule["properties"]
            self.check(
                isinstance(props.get("priority"), int) and 100 <= props["priority"] <= 4096, "priority"
            )
            self.check(
                props.get("direction") == "Inbound" and props.get("access") == "Allow", "not an inbound allow"
            )
            self.check(props.get("protocol") == "Tcp", "protocol is not Tcp")
            self.check(
                re.fullmatch(r"\d+(-\d+)?", props.get("destinationPortRange", "")) is not None, "port range"
            )
        resource = self._store(call, "Microsoft.Network/networkSecurityGroups", call.match["name"], body)
        return 200, resource

    # -- virtual machines ----------------------------------------------------------------------

    def _vm(self, call: Call) -> dict[str, Any]:
        vm = self.resources.get(
            self._id(call, "Microsoft.Compute/virtualMachines", call.match["name"]).lower()
        )
        if vm is None:
            raise ApiError(
                404,
                "ResourceNotFound",
                f"The Resource 'Microsoft.Compute/virtualMachines/"
                f"{call.match['name']}' under resource group '{call.match['group']}' was not found.",
            )
        return vm

    def _vm_list(self, call: Call) -> Reply:
        group = self._group(call)
        if self.transient_list_failures:
            self.transient_list_failures -= 1
            raise ApiError(503, "ServiceUnavailable", "The service is temporarily unavailable.")
        prefix = f"{group['id']}/providers/Microsoft.Compute/virtualMachines/".lower()
        return 200, {"value": [_public(r) for k, r in self.resources.items() if k.startswith(prefix)]}

    def _vm_get(self, call: Call) -> Reply:
        return 200, _public(self._vm(call))

    def _vm_view(self, call: Call) -> Reply:
        vm = self._vm(call)
        step = {
            "PowerState/starting": "PowerState/running",
            "PowerState/deallocating": "PowerState/deallocated",
        }
        if vm["_power"] in step:
            vm["_reads"] += 1
            if vm["_reads"] >= self.boot_polls or vm["_power"] == "PowerState/deallocating":
                vm["_power"], vm["_reads"] = step[vm["_power"]], 0
        state = vm["properties"]["provisioningState"]
        statuses = [{"code": f"ProvisioningState/{state.lower()}", "level": "Info"}]
        if vm["_power"]:
            statuses.append({"code": vm["_power"], "level": "Info"})
        return 200, {"computerName": vm["properties"]["osProfile"]["computerName"], "statuses": statuses}

    def _vm_put(self, call: Call) -> Reply:
        group = self._group(call)
        body, name = call.body, call.match["name"]
        region = body.get("location")
        self._check_vm(call, body, group)
        if region in self.put_faults:
            status, code, message = self.put_faults[region]
            size = body["properties"]["hardwareProfile"]["vmSize"]
            raise ApiError(status, code, message.format(size=size, region=region, sub=self.subscription))
        existing = self.resources.get(self._id(call, "Microsoft.Compute/virtualMachines", name).lower())
        if existing is not None and existing["properties"]["provisioningState"] != "Failed":
            return 200, _public(existing)
        fault = self.async_faults.get(region)
        vm = self._store(call, "Microsoft.Compute/virtualMachines", name, body)
        vm["properties"]["provisioningState"] = "Failed" if fault else "Succeeded"
        vm["properties"]["vmId"] = f"{next(self._ids):08x}-vm"
        vm.update(_power="" if fault else "PowerState/starting", _reads=0)
        self._create_nic(call, vm)
        headers = self._async("Compute", region, "Failed" if fault else "Succeeded", fault)
        return (
            201,
            {**_public(vm), "properties": {**vm["properties"], "provisioningState": "Creating"}},
            headers,
        )

    def _check_vm(self, call: Call, body: Any, group: dict[str, Any]) -> None:
        check = self.check
        name = call.match["name"]
        check(_VM_NAME.match(name) is not None, f"invalid VM name {name!r}")
        check(body.get("location") == group["location"], "VM outside its resource group's region")
        check(
            {"skyhop-cluster", "skyhop-node-rank"} <= set(body.get("tags", {})), "tags lack the cluster/rank"
        )
        props = body.get("properties", {})
        check(bool(props.get("hardwareProfile", {}).get("vmSize")), "no hardwareProfile.vmSize")
        storage = props.get("storageProfile", {})
        image = storage.get("imageReference", {})
        check(
            "id" in image or {"publisher", "offer", "sku", "version"} <= set(image), f"imageReference {image}"
        )
        disk = storage.get("osDisk", {})
        check(
            disk.get("createOption") == "FromImage" and disk.get("deleteOption") == "Delete", "osDisk options"
        )
        size = disk.get("diskSizeGB")
        check(size is None or isinstance(size, int), f"diskSizeGB {size!r} is not an integer")
        os_profile = props.get("osProfile", {})
        linux = os_profile.get("linuxConfiguration", {})
        keys = linux.get("ssh", {}).get("publicKeys", [])
        user = os_profile.get("adminUsername", "")
        check(
            linux.get("disablePasswordAuthentication") is True,
            "password logins must be off without a password",
        )
        check(len(keys) == 1 and keys[0].get("path") == f"/home/{user}/.ssh/authorized_keys", "ssh key path")
        check(
            keys[0].get("keyData", "").startswith("ssh-ed25519 "), "ssh keyData is not an OpenSSH public key"
        )
        network = props.get("networkProfile", {})
        configs = network.get("networkInterfaceConfigurations", [])
        check(
            bool(network.get("networkApiVersion")) and len(configs) == 1,
            "one inline NIC configuration expected",
        )
        nic = configs[0].get("properties", {})
        check(nic.get("deleteOption") == "Delete", "the NIC must be deleted with the VM")
        ip = nic.get("ipConfigurations", [{}])[0].get("properties", {})
        subnet = ip.get("subnet", {}).get("id", "").lower()
        check(
            subnet.startswith(group["id"].lower() + "/providers/microsoft.network/virtualnetworks/"), "subnet"
        )
        check(subnet.rsplit("/subnets/", 1)[0] in self.resources, "the subnet's network does not exist")
        check(
            nic.get("networkSecurityGroup", {}).get("id", "").lower() in self.resources, "NSG does not exist"
        )
        public = ip.get("publicIPAddressConfiguration", {}).get("properties", {})
        check(public.get("deleteOption") == "Delete", "the public IP must be deleted with the VM")
        if props.get("priority") == "Spot":
            check(props.get("evictionPolicy") in ("Deallocate", "Delete"), "spot needs an evictionPolicy")
            check(
                isinstance(props.get("billingProfile", {}).get("maxPrice"), int | float),
                "spot needs maxPrice",
            )
        else:
            check("evictionPolicy" not in props, "evictionPolicy is only valid for Spot/Low priority VMs")

    def _create_nic(self, call: Call, vm: dict[str, Any]) -> None:
        config = vm["properties"]["networkProfile"]["networkInterfaceConfigurations"][0]
        ip_config = config["properties"]["ipConfigurations"][0]
        address = ip_config["properties"]["publicIPAddressConfiguration"]
        number = next(self._ids) % 250
        pip = self._store(
            call,
            "Microsoft.Network/publicIPAddresses",
            address["name"],
            {"location": vm["location"], "properties": {"ipAddress": f"20.0.0.{number}"}},
        )
        nic_body = {
            "location": vm["location"],
            "properties": {
                "virtualMachine": {"id": vm["id"]},
                "ipConfigurations": [
                    {
                        "name": ip_config["name"],
                        "properties": {
                            "privateIPAddress": f"10.0.0.{number}",
                            "publicIPAddress": {"id": pip["id"]},
                        },
                    }
                ],
            },
        }
        nic = self._store(call, "Microsoft.Network/networkInterfaces", config["name"], nic_body)
        vm["_owned"] = [nic["id"].lower(), pip["id"].lower()]
        vm["properties"]["networkProfile"]["networkInterfaces"] = [{"id": nic["id"]}]

    def _vm_power(self, call: Call) -> Reply:
        vm = self._vm(call)
        vm["_power"] = (
            "PowerState/deallocating" if call.match["verb"] == "deallocate" else "PowerState/starting"
        )
        vm["_reads"] = 0
        return 202, None, self._async("Compute", vm["location"], "Succeeded")

    def _vm_delete(self, call: Call) -> Reply:
        vm = self._vm(call)
        for owned in [vm["id"].lower(), *vm.get("_owned", [])]:
            self.resources.pop(owned, None)
        return 202, None, self._async("Compute", vm["location"], "Succeeded")


def _public(resource: dict[str, Any]) -> dict[str, Any]:
    """The resource without the fake's own bookkeeping."""
    return {k: v for k, v in resource.items() if not k.startswith("_")}
