"""A local Compute Engine for contract tests of the ``gcp`` provider, checking every request.

It serves what the provider calls, with the documented JSON shapes: ``instances`` insert, aggregated
list (with a ``labels.KEY = "VALUE"`` filter), stop/start/delete; ``firewalls`` get/insert/patch/
delete; ``zoneOperations.wait`` / ``globalOperations.wait``; ``zoneOperations.list`` (preemptions,
see ``preempt``); ``projects.get``. Every call must carry
the self-signed JWT of the test's service-account key (verified against it). Requests are checked against
the API's rules (names, labels, ``diskSizeGb`` as a string, spot and GPU scheduling, request ids).
Faults are documented errors: an operation that ends in ``ZONE_RESOURCE_POOL_EXHAUSTED`` or
``QUOTA_EXCEEDED``, or an HTTP error from the insert itself.
"""

from __future__ import annotations

import base64
import functools
import itertools
import json
import re
import urllib.parse
import uuid
from pathlib import Path
from typing import Any, Protocol

import pytest

from tests.providers.fake_http import ApiError, Call, FakeApi, Reply

__all__ = ["FakeGCP", "GoogleAuth", "OperationFault", "signed_in", "write_service_account"]

_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
_LABEL = re.compile(r"^[a-z0-9_-]{0,63}$")
_BASE = "https://www.googleapis.com/compute/v1"
_P = r"/compute/v1/projects/(?P<project>[^/]+)"
_FILTER = re.compile(r'^labels\.(?P<key>[a-z0-9_-]+) = "(?P<value>[^"]*)"$')
_REASONS = {400: "invalid", 401: "required", 403: "forbidden", 404: "notFound", 409: "alreadyExists"}


class OperationFault:
    """A zone operation that finishes with a documented error instead of creating the instance."""

    POOL_EXHAUSTED = (
        "ZONE_RESOURCE_POOL_EXHAUSTED",
        "The zone 'projects/{project}/zones/{zone}' does not have enough resources available to fulfill "
        "the request.  Try a different zone, or try again later.",
        503,
        "SERVICE UNAVAILABLE",
    )
    QUOTA = (
        "QUOTA_EXCEEDED",
        "Quota 'CPUS' exceeded.  Limit: 8.0 in region {region}.",
        403,
        "FORBIDDEN",
    )
    GPU_QUOTA = (
        "QUOTA_EXCEEDED",
        "Quota 'GPUS_ALL_REGIONS' exceeded.  Limit: 0.0 globally.",
        403,
        "FORBIDDEN",
    )


def write_service_account(path: Path, token_uri: str, project: str) -> str:
    """A service-account key file (a fresh RSA key) for ``project``; returns its client email."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    email = f"skyhop-test@{project}.iam.gserviceaccount.com"
    path.write_text(
        json.dumps(
            {
                "type": "service_account",
                "project_id": project,
                "private_key_id": "k1",
                "private_key": pem.decode(),
                "client_email": email,
                "client_id": "1",
                "token_uri": token_uri,
            }
        )
    )
    return email


class _GoogleFake(Protocol):
    project: str
    key_file: Path

    def start(self) -> str: ...


def signed_in(fake: _GoogleFake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **apis: str) -> str:
    """Start ``fake`` and point Google's SDKs at it as the test's own service account: its key file,
    a gcloud folder of the test's, no project from the environment, and each API's endpoint
    (``CLOUDSDK_API_ENDPOINT_OVERRIDES_<API>``: the fake's URL and the path given). Returns the URL."""
    url = fake.start()
    write_service_account(fake.key_file, f"{url}/token", fake.project)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "gcloud"))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(fake.key_file))
    for api, path in apis.items():
        monkeypatch.setenv(f"CLOUDSDK_API_ENDPOINT_OVERRIDES_{api}", f"{url}{path}")
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT", raising=False)
    return url


def _b64(segment: str) -> bytes:
    return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))


class GoogleAuth:
    """Google's bearer-token check, for fakes of Google APIs: a call must carry a JWT that the test's
    service account signed itself (what the SDK sends for a service-account key when it may use
    self-signed JWTs), or an access token ``token`` issued for such a JWT (OAuth's JWT-bearer grant
    at the key's ``token_uri``, what the other SDKs do)."""

    key_file: Path
    issued: set[str]
    """Access tokens handed out by ``token``."""
    scopes = ("https://www.googleapis.com/auth/cloud-platform",)
    """OAuth scopes any one of which grants access to the API."""
    reasons = _REASONS
    """The ``errors[].reason`` of a generic error by HTTP status (each API names a 409 its own way)."""

    def error_body(self, error: ApiError) -> Any:
        """Google's JSON error shape, shared by its APIs."""
        reason = error.code if error.code != "InvalidRequest" else self.reasons.get(error.status, "invalid")
        return {
            "error": {
                "code": error.status,
                "message": error.message,
                "errors": [{"message": error.message, "domain": "global", "reason": reason}],
            }
        }

    def _authorized(self, header: str) -> bool:
        scheme, _, token = header.partition(" ")
        if scheme != "Bearer":
            return False
        return token in self.issued or self._signed_claims(token) is not None

    def token(self, call: Call) -> Reply:
        """``POST token_uri`` with ``grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer``."""
        form = dict(urllib.parse.parse_qsl(call.raw.decode()))
        if form.get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer":
            return 400, {"error": "unsupported_grant_type", "error_description": "Invalid grant_type"}
        if self._signed_claims(form.get("assertion", "")) is None:
            return 400, {"error": "invalid_grant", "error_description": "Invalid JWT Signature."}
        access = f"ya29.{uuid.uuid4().hex}"
        self.issued.add(access)
        return 200, {"access_token": access, "expires_in": 3599, "token_type": "Bearer"}

    def _signed_claims(self, jwt: str) -> dict[str, Any] | None:
        """The claims of a JWT signed by the key file's account for one of ``scopes``, else None."""
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        email, public = self._account()
        try:
            header, claims, signature = jwt.split(".")
            public.verify(_b64(signature), f"{header}.{claims}".encode(), padding.PKCS1v15(), hashes.SHA256())
            payload: dict[str, Any] = json.loads(_b64(claims))
        except Exception:
            return None
        scoped = bool(set(str(payload.get("scope", "")).split()) & set(self.scopes))
        return payload if payload.get("iss") == email and scoped else None

    @functools.cache  # noqa: B019 - one fake per test, and loading an RSA key is slow
    def _account(self) -> tuple[str, Any]:
        """The key file's account email and public key."""
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        key_info = json.loads(self.key_file.read_text())
        private = serialization.load_pem_private_key(key_info["private_key"].encode(), password=None)
        assert isinstance(private, rsa.RSAPrivateKey)
        return key_info["client_email"], private.public_key()


class FakeGCP(GoogleAuth, FakeApi):
    """Compute Engine for one project, in memory."""

    def __init__(self, project: str, key_file: Path) -> None:
        super().__init__()
        self.project = project
        self.key_file = key_file
        self.issued = set()
        self.instances: dict[tuple[str, str], dict[str, Any]] = {}
        self.firewalls: dict[str, dict[str, Any]] = {}
        self.operations: dict[str, dict[str, Any]] = {}
        self.request_ids: dict[str, str] = {}
        self.zone_faults: dict[str, tuple[str, str, int, str]] = {}
        """zone -> the error its insert operations end with."""
        self.fault_after = 0
        """How many inserts into a faulty zone succeed before its fault applies (a partial multi-node)."""
        self.insert_http_errors: dict[str, tuple[int, str, str]] = {}
        """zone -> (status, reason, message) the insert call itself fails with."""
        self.transient_list_failures = 0
        """How many aggregated lists to answer 503 first (the SDK's retry must absorb them)."""
        self.boot_polls = 2
        """Aggregated lists an instance spends in PROVISIONING/STAGING before RUNNING."""
        self._ids = itertools.count(1000)
        self.route("GET", _P, self._project)
        self.route("GET", _P + r"/aggregated/instances", self._aggregated)
        self.route("POST", _P + r"/zones/(?P<zone>[^/]+)/instances", self._insert)
        self.route(
            "POST", _P + r"/zones/(?P<zone>[^/]+)/instances/(?P<name>[^/]+)/(?P<verb>stop|start)", self._power
        )
        self.route("DELETE", _P + r"/zones/(?P<zone>[^/]+)/instances/(?P<name>[^/]+)", self._delete)
        self.route("POST", _P + r"/zones/(?P<zone>[^/]+)/operations/(?P<op>[^/]+)/wait", self._wait)
        self.route("GET", _P + r"/zones/(?P<zone>[^/]+)/operations", self._operations_list)
        self.route("POST", _P + r"/global/operations/(?P<op>[^/]+)/wait", self._wait)
        self.route("GET", _P + r"/global/firewalls/(?P<name>[^/]+)", self._firewall_get)
        self.route("POST", _P + r"/global/firewalls", self._firewall_insert)
        self.route("PATCH", _P + r"/global/firewalls/(?P<name>[^/]+)", self._firewall_patch)
        self.route("DELETE", _P + r"/global/firewalls/(?P<name>[^/]+)", self._firewall_delete)

    def dispatch(self, call: Call) -> Reply:
        if not self._authorized(call.headers.get("authorization", "")):
            self.violations.append(f"{call.method} {call.path} without a valid bearer token")
            return 401, self.error_body(ApiError(401, "required", "Login Required."))
        return super().dispatch(call)

    # -- project ------------------------------------------------------------------------------

    def _project(self, call: Call) -> Reply:
        self._own(call)
        return 200, {"kind": "compute#project", "name": self.project, "id": "4242"}

    def _own(self, call: Call) -> None:
        if call.match["project"] != self.project:
            raise ApiError(
                403,
                "forbidden",
                f"Required 'compute.instances.list' permission for 'projects/{call.match['project']}'",
            )

    # -- operations ---------------------------------------------------------------------------

    def _operation(
        self, kind: str, target: str, zone: str | None, error: tuple[str, str, int, str] | None
    ) -> Any:
        name = f"operation-{next(self._ids)}-{uuid.uuid4().hex[:12]}"
        where = f"{_BASE}/projects/{self.project}" + (f"/zones/{zone}" if zone else "/global")
        operation: dict[str, Any] = {
            "kind": "compute#operation",
            "id": str(next(self._ids)),
            "name": name,
            "operationType": kind,
            "targetLink": f"{where}/{target}",
            "status": "RUNNING",
            "progress": 0,
            "insertTime": "2026-01-01T00:00:00.000-08:00",
            "selfLink": f"{where}/operations/{name}",
        }
        if zone:
            operation["zone"] = f"{_BASE}/projects/{self.project}/zones/{zone}"
        done = {**operation, "status": "DONE", "progress": 100, "endTime": "2026-01-01T00:00:05.000-08:00"}
        if error:
            code, message, status, status_message = error
            region = (zone or "").rsplit("-", 1)[0]
            done["error"] = {
                "errors": [
                    {"code": code, "message": message.format(project=self.project, zone=zone, region=region)}
                ]
            }
            done["httpErrorStatusCode"] = status
            done["httpErrorMessage"] = status_message
        self.operations[name] = done
        return operation

    def preempt(self, zone: str, name: str) -> None:
        """Reclaim a spot instance as Compute Engine does: a ``compute.instances.preempted`` operation
        on it, then (termination action ``DELETE``) the instance is gone."""
        instance = self.instances.pop((zone, name))
        operation = self._operation("compute.instances.preempted", f"instances/{name}", zone, None)
        self.operations[operation["name"]].update(user="system", targetId=instance.get("id", ""))

    def _operations_list(self, call: Call) -> Reply:
        """``zoneOperations.list``, with the one filter form the provider sends."""
        self._own(call)
        wanted = re.fullmatch(r'operationType = "(?P<type>[a-z.]+)"', call.query.get("filter", ""))
        self.check(wanted is not None, f'filter {call.query.get("filter")!r} is not operationType = "TYPE"')
        assert wanted is not None
        zone = call.match["zone"]
        items = [
            op
            for op in self.operations.values()
            if op.get("zone", "").endswith(f"/zones/{zone}") and op["operationType"] == wanted["type"]
        ]
        where = f"{_BASE}/projects/{self.project}/zones/{zone}"
        return 200, {
            "kind": "compute#operationList",
            "id": where,
            "items": items,
            "selfLink": f"{where}/operations",
        }

    def _wait(self, call: Call) -> Reply:
        self._own(call)
        operation = self.operations.get(call.match["op"])
        if operation is None:
            raise ApiError(404, "notFound", f"The resource '{call.path}' was not found", violation=True)
        self.check(
            call.match.get("zone") is None or operation.get("zone", "").endswith(f"/{call.match['zone']}"),
            "operation waited on in another zone",
        )
        return 200, operation

    # -- instances ----------------------------------------------------------------------------

    def _aggregated(self, call: Call) -> Reply:
        self._own(call)
        if self.transient_list_failures:
            self.transient_list_failures -= 1
            raise ApiError(503, "backendError", "Backend Error")
        wanted = _FILTER.match(call.query.get("filter", ""))
        self.check(wanted is not None, f'filter {call.query.get("filter")!r} is not labels.KEY = "VALUE"')
        assert wanted is not None
        items: dict[str, Any] = {}
        for (zone, _), instance in sorted(self.instances.items()):
            if instance["labels"].get(wanted["key"]) != wanted["value"]:
                continue
            self._advance(instance)
            items.setdefault(f"zones/{zone}", {"instances": []})["instances"].append(instance)
        return 200, {
            "kind": "compute#instanceAggregatedList",
            "id": f"projects/{self.project}/aggregated/instances",
            "items": items,
            "selfLink": f"{_BASE}/projects/{self.project}/aggregated/instances",
        }

    def _advance(self, instance: dict[str, Any]) -> None:
        """Instances boot and stop over successive reads, as real ones do over seconds."""
        step = {"PROVISIONING": "STAGING", "STAGING": "RUNNING", "STOPPING": "TERMINATED"}
        if instance["status"] in step:
            instance["_polls"] = instance.get("_polls", 0) + 1
            if instance["_polls"] >= self.boot_polls or instance["status"] == "STOPPING":
                instance["status"], instance["_polls"] = step[instance["status"]], 0

    def _insert(self, call: Call) -> Reply:
        self._own(call)
        zone, body = call.match["zone"], call.body
        request_id = call.query.get("requestId", "")
        self.check(_is_uuid(request_id), f"requestId {request_id!r} is not a UUID")
        if request_id in self.request_ids:
            return 200, self._replay(self.request_ids[request_id])
        self._check_instance(zone, body)
        if zone in self.insert_http_errors:
            status, reason, message = self.insert_http_errors[zone]
            raise ApiError(status, reason, message)
        name = body["name"]
        if (zone, name) in self.instances:
            raise ApiError(
                409,
                "alreadyExists",
                f"The resource 'projects/{self.project}/zones/{zone}/instances/{name}' already exists",
            )
        fault = self.zone_faults.get(zone)
        if fault is not None and self.fault_after > 0:
            self.fault_after, fault = self.fault_after - 1, None
        operation = self._operation("insert", f"instances/{name}", zone, fault)
        self.request_ids[request_id] = operation["name"]
        if fault is None:
            number = next(self._ids)
            self.instances[(zone, name)] = {
                **body,
                "kind": "compute#instance",
                "id": str(number),
                "zone": f"{_BASE}/projects/{self.project}/zones/{zone}",
                "status": "PROVISIONING",
                "networkInterfaces": [
                    {
                        **body["networkInterfaces"][0],
                        "name": "nic0",
                        "networkIP": f"10.128.0.{number % 250}",
                        "accessConfigs": [
                            {
                                **body["networkInterfaces"][0]["accessConfigs"][0],
                                "natIP": f"34.0.0.{number % 250}",
                            }
                        ],
                    }
                ],
                "selfLink": f"{_BASE}/projects/{self.project}/zones/{zone}/instances/{name}",
            }
        return 200, operation

    def _replay(self, name: str) -> Any:
        return {**self.operations[name], "status": "RUNNING"}

    def _check_instance(self, zone: str, body: Any) -> None:
        """The documented rules of an insert body (and the shape skyhop promises to send)."""
        check = self.check
        check(isinstance(body, dict), "instance body is not a JSON object")
        check(bool(_NAME.match(body.get("name", ""))), f"invalid instance name {body.get('name')!r}")
        check(
            re.fullmatch(rf"zones/{zone}/machineTypes/[a-z0-9-]+", body.get("machineType", "")) is not None,
            f"machineType {body.get('machineType')!r} is not in zone {zone}",
        )
        labels = body.get("labels", {})
        check({"skyhop-cluster", "skyhop-node-rank"} <= set(labels), f"labels {labels} lack the cluster/rank")
        check(all(_LABEL.match(k) and _LABEL.match(v) for k, v in labels.items()), f"invalid labels {labels}")
        disks = body.get("disks", [])
        check(
            len(disks) == 1 and disks[0].get("boot") is True and disks[0].get("autoDelete") is True,
            "exactly one auto-deleted boot disk expected",
        )
        params = disks[0].get("initializeParams", {})
        check(bool(params.get("sourceImage")), "boot disk without sourceImage")
        size = params.get("diskSizeGb")
        check(
            size is None or (isinstance(size, str) and size.isdigit()),
            f"diskSizeGb {size!r} is not an int64 string",
        )
        interface = (body.get("networkInterfaces") or [{}])[0]
        check(interface.get("network") == "global/networks/default", "not on the default network")
        check((interface.get("accessConfigs") or [{}])[0].get("type") == "ONE_TO_ONE_NAT", "no external NAT")
        keys = {i["key"]: i["value"] for i in body.get("metadata", {}).get("items", [])}
        check(
            re.match(r"^[a-z_][a-z0-9_-]*:ssh-ed25519 \S+", keys.get("ssh-keys", "")) is not None,
            "metadata ssh-keys is not USER:KEY",
        )
        scheduling = body.get("scheduling", {})
        for accelerator in body.get("guestAccelerators", []):
            check(
                re.fullmatch(
                    rf"projects/{self.project}/zones/{zone}/acceleratorTypes/nvidia-[a-z0-9-]+",
                    accelerator.get("acceleratorType", ""),
                )
                is not None,
                f"acceleratorType {accelerator.get('acceleratorType')!r}",
            )
            check(isinstance(accelerator.get("acceleratorCount"), int), "acceleratorCount is not an integer")
        if body.get("guestAccelerators") and scheduling.get("onHostMaintenance") != "TERMINATE":
            raise ApiError(
                400,
                "invalid",
                "Invalid value for field 'resource.scheduling.onHostMaintenance': "
                "'MIGRATE'. Instances with guest accelerators do not support live migration.",
                violation=True,
            )
        if scheduling.get("provisioningModel") == "SPOT":
            check(
                scheduling.get("automaticRestart") is False
                and scheduling.get("onHostMaintenance") == "TERMINATE",
                "Spot VMs need automaticRestart false and onHostMaintenance TERMINATE",
            )
            check(
                scheduling.get("instanceTerminationAction") in ("STOP", "DELETE"), "spot termination action"
            )
        check(scheduling.get("provisioningModel", "STANDARD") in ("STANDARD", "SPOT"), "provisioningModel")

    def _power(self, call: Call) -> Reply:
        self._own(call)
        instance = self._instance(call)
        verb = call.match["verb"]
        instance["status"] = "STOPPING" if verb == "stop" else "STAGING"
        return 200, self._operation(verb, f"instances/{instance['name']}", call.match["zone"], None)

    def _delete(self, call: Call) -> Reply:
        self._own(call)
        instance = self._instance(call)
        del self.instances[(call.match["zone"], instance["name"])]
        return 200, self._operation("delete", f"instances/{instance['name']}", call.match["zone"], None)

    def _instance(self, call: Call) -> dict[str, Any]:
        key = (call.match["zone"], call.match["name"])
        if key not in self.instances:
            raise ApiError(
                404,
                "notFound",
                f"The resource 'projects/{self.project}/zones/{key[0]}/instances/{key[1]}' was not found",
            )
        return self.instances[key]

    # -- firewalls ----------------------------------------------------------------------------

    def _firewall(self, call: Call) -> dict[str, Any]:
        name = call.match["name"]
        if name not in self.firewalls:
            raise ApiError(
                404,
                "notFound",
                f"The resource 'projects/{self.project}/global/firewalls/{name}' was not found",
            )
        return self.firewalls[name]

    def _firewall_get(self, call: Call) -> Reply:
        self._own(call)
        return 200, self._firewall(call)

    def _check_allowed(self, allowed: Any) -> None:
        self.check(isinstance(allowed, list) and len(allowed) == 1, "one allowed entry expected")
        self.check(allowed[0].get("IPProtocol") == "tcp", "allowed[0].IPProtocol is not tcp")
        ports = allowed[0].get("ports", [])
        self.check(all(re.fullmatch(r"\d+(-\d+)?", p) for p in ports) and "22" in ports, f"ports {ports}")

    def _firewall_insert(self, call: Call) -> Reply:
        self._own(call)
        body = call.body
        self.check(bool(_NAME.match(body.get("name", ""))), f"invalid firewall name {body.get('name')!r}")
        self.check(
            body.get("direction") == "INGRESS" and body.get("sourceRanges") == ["0.0.0.0/0"], "direction"
        )
        self.check(body.get("targetTags") == [body["name"]], "the rule must target the cluster's network tag")
        self.check(body.get("network") == "global/networks/default", "not on the default network")
        self._check_allowed(body.get("allowed"))
        if body["name"] in self.firewalls:
            raise ApiError(
                409,
                "alreadyExists",
                f"The resource 'projects/{self.project}/global/firewalls/{body['name']}' already exists",
            )
        self.firewalls[body["name"]] = {**body, "kind": "compute#firewall", "id": str(next(self._ids))}
        return 200, self._operation("insert", f"firewalls/{body['name']}", None, None)

    def _firewall_patch(self, call: Call) -> Reply:
        self._own(call)
        rule = self._firewall(call)
        self._check_allowed(call.body.get("allowed"))
        rule["allowed"] = call.body["allowed"]
        return 200, self._operation("patch", f"firewalls/{rule['name']}", None, None)

    def _firewall_delete(self, call: Call) -> Reply:
        self._own(call)
        self._firewall(call)
        del self.firewalls[call.match["name"]]
        return 200, self._operation("delete", f"firewalls/{call.match['name']}", None, None)


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True
