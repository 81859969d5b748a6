"""A local Cloud TPU API (v2) beside the fake Compute Engine, checking every request.

It serves what the gcp provider calls for TPU VMs, with the documented JSON shapes: ``nodes.create``
(``POST .../locations/ZONE/nodes?nodeId=ID``), ``get``, ``delete``, ``list`` (``locations/-`` for
every zone, paged), each mutation answering a long-running ``Operation`` polled by ``GET`` on its
name. Errors are google.rpc's: ``{"error": {"code": 409, "message": ..., "status":
"ALREADY_EXISTS"}}`` for a call, ``{"code": 8, "message": ...}`` in a done operation. The token
endpoint serves the service account's OAuth grant, which ``AuthorizedSession`` asks for.
"""

from __future__ import annotations

import re
from typing import Any

from tests.providers.fake_gcp import FakeGCP
from tests.providers.fake_http import ApiError, Call, FakeApi, Reply

__all__ = ["FakeGCPWithTPU", "TpuFault"]

_L = r"/v2/projects/(?P<project>[^/]+)/locations/(?P<zone>[^/]+)"
_ID = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
_TYPES = re.compile(r"^v[2-6](p|e|litepod)?-\d+$")
_RPC = {
    "INVALID_ARGUMENT": 3,
    "NOT_FOUND": 5,
    "ALREADY_EXISTS": 6,
    "PERMISSION_DENIED": 7,
    "RESOURCE_EXHAUSTED": 8,
}


class TpuFault:
    """How a create fails: (where: ``operation`` or ``call``, rpc status, HTTP status, message)."""

    NO_CAPACITY = (
        "operation",
        "RESOURCE_EXHAUSTED",
        429,
        'There is no more capacity in the zone "{zone}"; you can try in another zone where Cloud TPU '
        "Nodes are offered (see https://cloud.google.com/tpu/docs/regions) [EID: 0x1]",
    )
    QUOTA = (
        "call",
        "RESOURCE_EXHAUSTED",
        429,
        "Quota limit 'TPUV2sPreemptiblePodPerProjectPerZoneForTPUAPI' has been exceeded. Limit: 0 in zone "
        "{zone}.",
    )
    DENIED = (
        "call",
        "PERMISSION_DENIED",
        403,
        "Permission 'tpu.nodes.create' denied on 'projects/{project}'",
    )


class FakeGCPWithTPU(FakeGCP):
    """Compute Engine and Cloud TPU for one project, in memory, on one port."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.nodes: dict[tuple[str, str], dict[str, Any]] = {}
        self.tpu_faults: dict[str, tuple[str, str, int, str]] = {}
        """zone -> how its creates fail."""
        self.tpu_disabled = False
        """Answer every TPU call as a project with the Cloud TPU API off does."""
        self.page_size = 2
        self.route("POST", r"/token", self.token)
        self.route("POST", _L + r"/nodes", self._create)
        self.route("GET", _L + r"/nodes", self._list)
        self.route("GET", _L + r"/nodes/(?P<node>[^/]+)", self._get)
        self.route("DELETE", _L + r"/nodes/(?P<node>[^/]+)", self._delete_node)
        self.route("GET", _L + r"/operations/(?P<op>[^/]+)", self._operation_get)
        self.tpu_operations: dict[str, dict[str, Any]] = {}

    def dispatch(self, call: Call) -> Reply:
        if call.path == "/token":
            return FakeApi.dispatch(self, call)  # the grant itself needs no token
        if (
            call.path.startswith("/v2/")
            and self.tpu_disabled
            and self._authorized(call.headers.get("authorization", ""))
        ):
            self.calls.append(call)
            return 403, _rpc_body(
                403,
                "PERMISSION_DENIED",
                "Cloud TPU API has not been used in project 4242 before or it is disabled.",
                [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "SERVICE_DISABLED"}],
            )
        return super().dispatch(call)

    def error_body(self, error: ApiError) -> Any:
        if error.code in _RPC:
            return _rpc_body(error.status, error.code, error.message)
        return super().error_body(error)

    def _tpu_own(self, call: Call) -> None:
        if call.match["project"] != self.project:
            raise ApiError(
                403, "PERMISSION_DENIED", f"Permission denied on 'projects/{call.match['project']}'"
            )

    def _tpu_operation(self, zone: str, node_id: str, verb: str, error: tuple[int, str] | None) -> Any:
        name = f"projects/{self.project}/locations/{zone}/operations/operation-{next(self._ids)}"
        target = f"projects/{self.project}/locations/{zone}/nodes/{node_id}"
        pending = {
            "name": name,
            "metadata": {"@type": "type.googleapis.com/google.cloud.common.OperationMetadata", "verb": verb,
                         "target": target},
            "done": False,
        }  # fmt: skip
        done: dict[str, Any] = {**pending, "done": True}
        if error is None:
            done["response"] = {"@type": "type.googleapis.com/google.cloud.tpu.v2.Node", "name": target}
        else:
            done["error"] = {"code": error[0], "message": error[1]}
        self.tpu_operations[name] = done
        return pending

    def _operation_get(self, call: Call) -> Reply:
        self._tpu_own(call)
        name = call.path.removeprefix("/v2/")
        self.check(name in self.tpu_operations, f"unknown operation {name}")
        return 200, self.tpu_operations[name]

    def _create(self, call: Call) -> Reply:
        self._tpu_own(call)
        zone, body, node_id = call.match["zone"], call.body, call.query.get("nodeId", "")
        check = self.check
        check(zone != "-", "a node is created in one zone")
        check(bool(_ID.match(node_id)), f"nodeId {node_id!r} is not a valid node name")
        check(isinstance(body, dict) and "name" not in body, "the body names no node: nodeId does")
        check(
            bool(_TYPES.match(body.get("acceleratorType", ""))),
            f"acceleratorType {body.get('acceleratorType')}",
        )
        check(bool(body.get("runtimeVersion")), "runtimeVersion is required")
        network = body.get("networkConfig", {})
        check(
            network.get("network") == f"projects/{self.project}/global/networks/default", f"network {network}"
        )
        check(network.get("enableExternalIps") is True, "no external IP: skyhop could not reach the node")
        labels = body.get("labels", {})
        check({"skyhop-cluster", "skyhop-node-rank"} <= set(labels), f"labels {labels} lack the cluster/rank")
        metadata = body.get("metadata", {})
        check(
            isinstance(metadata, dict) and all(isinstance(v, str) for v in metadata.values()), "metadata map"
        )
        check(
            re.match(r"^[a-z_][a-z0-9_-]*:ssh-ed25519 \S+", metadata.get("ssh-keys", "")) is not None,
            "metadata ssh-keys is not USER:KEY",
        )
        check(
            set(body.get("schedulingConfig", {})) <= {"preemptible", "spot", "reserved"}, "schedulingConfig"
        )
        if (zone, node_id) in self.nodes:
            raise ApiError(
                409, "ALREADY_EXISTS", f"Resource '{self._node_name(zone, node_id)}' already exists"
            )
        fault = self.tpu_faults.get(zone)
        if fault is not None and fault[0] == "call":
            raise ApiError(fault[2], fault[1], fault[3].format(zone=zone, project=self.project))
        if fault is not None:
            message = fault[3].format(zone=zone, project=self.project)
            return 200, self._tpu_operation(zone, node_id, "create", (_RPC[fault[1]], message))
        number = next(self._ids)
        self.nodes[(zone, node_id)] = {
            **body,
            "name": self._node_name(zone, node_id),
            "state": "CREATING",
            "networkEndpoints": [
                {"ipAddress": f"10.130.0.{number % 250}", "port": 8470,
                 "accessConfig": {"externalIp": f"35.0.0.{number % 250}"}}
            ],
            "health": "HEALTHY",
            "apiVersion": "V2",
        }  # fmt: skip
        return 200, self._tpu_operation(zone, node_id, "create", None)

    def _node_name(self, zone: str, node_id: str) -> str:
        return f"projects/{self.project}/locations/{zone}/nodes/{node_id}"

    def _node(self, call: Call) -> dict[str, Any]:
        self._tpu_own(call)
        key = (call.match["zone"], call.match["node"])
        if key not in self.nodes:
            raise ApiError(404, "NOT_FOUND", f"Resource '{self._node_name(*key)}' was not found")
        return self.nodes[key]

    def _get(self, call: Call) -> Reply:
        return 200, self._node(call)

    def _delete_node(self, call: Call) -> Reply:
        self._node(call)
        del self.nodes[(call.match["zone"], call.match["node"])]
        return 200, self._tpu_operation(call.match["zone"], call.match["node"], "delete", None)

    def _list(self, call: Call) -> Reply:
        """``nodes.list``: one zone or ``-``, ``pageSize`` nodes a page; the API has no filter."""
        self._tpu_own(call)
        self.check(set(call.query) <= {"pageToken", "pageSize"}, f"nodes.list takes no {set(call.query)}")
        zone = call.match["zone"]
        found = [n for (z, _), n in sorted(self.nodes.items()) if zone in ("-", z)]
        for node in found:
            if node["state"] == "CREATING":  # a TPU VM is READY a list after it was created
                node["_polls"] = node.get("_polls", 0) + 1
                node["state"] = "READY" if node["_polls"] >= self.boot_polls else "CREATING"
        start = int(call.query.get("pageToken") or 0)
        page: dict[str, Any] = {"nodes": found[start : start + self.page_size]}
        if start + self.page_size < len(found):
            page["nextPageToken"] = str(start + self.page_size)
        return 200, page

    def preempt_tpu(self, zone: str, node_id: str) -> None:
        """Take a spot TPU VM back as Google does: it stays, ``PREEMPTED``, until deleted."""
        self.nodes[(zone, node_id)]["state"] = "PREEMPTED"


def _rpc_body(status: int, code: str, message: str, details: list[Any] | None = None) -> Any:
    return {"error": {"code": status, "message": message, "status": code, "details": details or []}}
