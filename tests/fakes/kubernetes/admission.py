"""What the API server does to an object before storing it: defaulting and validation (422 Invalid).

Pods: ``restartPolicy`` Always, ``terminationGracePeriodSeconds`` 30, ``schedulerName``, requests
defaulted from limits, extended resources (``nvidia.com/gpu``) only whole and with requests equal to
limits, status Pending. Services: a cluster IP, ``targetPort`` defaulting to ``port``, a node port for
NodePort services. Secrets: ``stringData`` folded into base64 ``data``. PersistentVolumeClaims: access
modes and a storage request required, the default StorageClass ``standard``, and Bound at once (a
provisioner that is always there and instant; the kubelet gives each claim a folder).
"""

from __future__ import annotations

import base64
import itertools
from typing import Any

from tests.fakes.kubernetes.quantity import InvalidQuantity, parse_quantity
from tests.fakes.kubernetes.status import StatusError

__all__ = ["admit"]

Obj = dict[str, Any]
GPU = "nvidia.com/gpu"
_RESTART_POLICIES = ("Always", "OnFailure", "Never")
_cluster_ips = itertools.count(1)
_node_ports = itertools.count(30000)


def _invalid(kind: str, name: str, causes: list[tuple[str, str]]) -> StatusError:
    message = f'{kind} "{name}" is invalid: ' + ", ".join(f"{field}: {why}" for field, why in causes)
    details = {
        "name": name,
        "kind": kind,
        "causes": [{"reason": "FieldValueInvalid", "message": why, "field": field} for field, why in causes],
    }
    return StatusError(422, "Invalid", message, details)


def _admit_pod(pod: Obj) -> None:
    name = pod["metadata"].get("name") or pod["metadata"].get("generateName") or ""
    spec = pod.setdefault("spec", {})
    problems: list[tuple[str, str]] = []
    containers = spec.get("containers") or []
    if not containers:
        problems.append(("spec.containers", "Required value"))
    spec.setdefault("restartPolicy", "Always")
    if spec["restartPolicy"] not in _RESTART_POLICIES:
        problems.append(
            (
                "spec.restartPolicy",
                f'Unsupported value: "{spec["restartPolicy"]}": supported values: '
                + ", ".join(f'"{p}"' for p in _RESTART_POLICIES),
            )
        )
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    seen: set[str] = set()
    for index, container in enumerate(containers):
        where = f"spec.containers[{index}]"
        if not container.get("name"):
            problems.append((f"{where}.name", "Required value"))
        elif container["name"] in seen:
            problems.append((f"{where}.name", f'Duplicate value: "{container["name"]}"'))
        seen.add(container.get("name", ""))
        if not container.get("image"):
            problems.append((f"{where}.image", "Required value"))
        resources = container.setdefault("resources", {})
        limits, requests = resources.get("limits") or {}, resources.get("requests") or {}
        for resource, value in limits.items():
            requests.setdefault(resource, value)
        for kind, values in (("limits", limits), ("requests", requests)):
            for resource, value in values.items():
                try:
                    amount = parse_quantity(value)
                except InvalidQuantity as error:
                    problems.append(
                        (f"{where}.resources.{kind}[{resource}]", f'Invalid value: "{value}": {error}')
                    )
                    continue
                if "/" in resource and "kubernetes.io" not in resource and amount.denominator != 1:
                    problems.append(
                        (
                            f"{where}.resources.{kind}[{resource}]",
                            f'Invalid value: "{value}": must be an integer',
                        )
                    )
        if requests:
            resources["requests"] = requests
        if GPU in requests and str(requests[GPU]) != str(limits.get(GPU)):
            problems.append(
                (
                    f"{where}.resources.requests[{GPU}]",
                    f'Invalid value: "{requests[GPU]}": must be equal to {GPU} limit of {limits.get(GPU, 0)}',
                )
            )
        container.setdefault(
            "imagePullPolicy",
            "Always"
            if str(container.get("image", "")).endswith(":latest")
            or ":" not in str(container.get("image", ""))
            else "IfNotPresent",
        )
        container.setdefault("terminationMessagePath", "/dev/termination-log")
    if problems:
        raise _invalid("Pod", name, problems)
    pod["status"] = {"phase": "Pending", "qosClass": _qos(containers)}


def _qos(containers: list[Obj]) -> str:
    guaranteed, burstable = True, False
    for container in containers:
        resources = container.get("resources") or {}
        limits, requests = resources.get("limits") or {}, resources.get("requests") or {}
        burstable = burstable or bool(limits or requests)
        for resource in ("cpu", "memory"):
            if resource not in limits or str(limits[resource]) != str(requests.get(resource)):
                guaranteed = False
    return "Guaranteed" if guaranteed else "Burstable" if burstable else "BestEffort"


def _admit_service(service: Obj) -> None:
    name = service["metadata"].get("name", "")
    spec = service.setdefault("spec", {})
    spec.setdefault("type", "ClusterIP")
    ports = spec.get("ports") or []
    if not ports and spec.get("clusterIP") != "None":
        raise _invalid("Service", name, [("spec.ports", "Required value")])
    for port in ports:
        if not isinstance(port.get("port"), int) or not 0 < port["port"] < 65536:
            raise _invalid(
                "Service",
                name,
                [
                    (
                        "spec.ports[0].port",
                        f"Invalid value: {port.get('port')}: must be between 1 and 65535, inclusive",
                    )
                ],
            )
        port.setdefault("protocol", "TCP")
        port.setdefault("targetPort", port["port"])
        if spec["type"] in ("NodePort", "LoadBalancer"):
            port.setdefault("nodePort", next(_node_ports))
    if spec.get("clusterIP") != "None":
        number = next(_cluster_ips)
        spec["clusterIP"] = f"10.96.{number // 250}.{number % 250 + 1}"
        spec["clusterIPs"] = [spec["clusterIP"]]
    spec.setdefault("sessionAffinity", "None")
    service["status"] = {"loadBalancer": {}}


def _admit_secret(secret: Obj) -> None:
    secret.setdefault("type", "Opaque")
    data = secret.get("data") or {}
    for key, value in (secret.pop("stringData", None) or {}).items():
        data[key] = base64.b64encode(str(value).encode()).decode()
    for key, value in data.items():
        try:
            base64.b64decode(value, validate=True)
        except ValueError:
            raise _invalid(
                "Secret", secret["metadata"].get("name", ""), [(f"data[{key}]", "illegal base64 data")]
            ) from None
    if data:
        secret["data"] = data


_ACCESS_MODES = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")
DEFAULT_STORAGE_CLASS = "standard"


def _admit_claim(claim: Obj) -> None:
    name = claim["metadata"].get("name", "")
    spec = claim.setdefault("spec", {})
    problems: list[tuple[str, str]] = []
    modes = spec.get("accessModes") or []
    if not modes:
        problems.append(("spec.accessModes", "Required value: at least 1 access mode is required"))
    for mode in modes:
        if mode not in _ACCESS_MODES:
            supported = ", ".join(f'"{m}"' for m in _ACCESS_MODES)
            problems.append(
                ("spec.accessModes", f'Unsupported value: "{mode}": supported values: {supported}')
            )
    storage = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
    if storage is None:
        problems.append(("spec.resources[storage]", "Required value"))
    else:
        try:
            parse_quantity(storage)
        except InvalidQuantity as error:
            problems.append(("spec.resources.requests[storage]", f'Invalid value: "{storage}": {error}'))
    if problems:
        raise _invalid("PersistentVolumeClaim", name, problems)
    spec.setdefault("storageClassName", DEFAULT_STORAGE_CLASS)
    spec.setdefault("volumeMode", "Filesystem")
    spec["volumeName"] = f"pvc-{name}"
    claim["status"] = {"phase": "Bound", "accessModes": list(modes), "capacity": {"storage": storage}}


def admit(resource: str, obj: Obj) -> None:
    """Default and validate ``obj`` in place for a create; raises 422 ``StatusError``."""
    if resource == "pods":
        _admit_pod(obj)
    elif resource == "services":
        _admit_service(obj)
    elif resource == "secrets":
        _admit_secret(obj)
    elif resource == "persistentvolumeclaims":
        _admit_claim(obj)
    elif resource == "namespaces":
        obj["spec"] = {"finalizers": ["kubernetes"]}
        obj["status"] = {"phase": "Active"}
