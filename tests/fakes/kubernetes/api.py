"""The HTTP face of the fake: kube-apiserver's paths, verbs, query parameters and JSON shapes.

Served: ``/version``, ``/api``, ``/apis`` and ``/api/v1`` discovery (legacy, which kubectl falls back
to when the answer is not aggregated discovery); list (``labelSelector``, ``fieldSelector``,
``limit``/``continue``), deletecollection (DELETE with selectors), ``?watch=true`` (chunked JSON lines
from ``resourceVersion``, ``timeoutSeconds``), get, create, PUT (409 on a stale resourceVersion),
merge PATCH and delete for pods, services, secrets, persistentvolumeclaims, events, nodes and
namespaces; ``pods/{name}/exec``
(``exec.py``), ``pods/{name}/eviction``, ``pods/{name}/log`` (``follow``, ``previous``, ``tailLines``)
and ``pods/{name}/status``. Tables for ``kubectl get`` (``tables.py``). Errors are ``Status`` objects.

Over HTTPS (the default, ``tls.py``) every request needs the kubeconfig's bearer token (401
``Unauthorized`` otherwise). Over plain HTTP it is the old insecure port: client-go (kubectl) sends no
credentials over plain HTTP, so a request without ``Authorization`` is served there.
"""

from __future__ import annotations

import base64
import copy
import json
import select
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.fakes.kubernetes.admission import admit
from tests.fakes.kubernetes.exec import exec_session
from tests.fakes.kubernetes.kubelet import Kubelet
from tests.fakes.kubernetes.resources import RESOURCES, api_resource_list
from tests.fakes.kubernetes.selectors import field_selector, label_selector
from tests.fakes.kubernetes.status import StatusError, not_found, status, timestamp
from tests.fakes.kubernetes.store import Store, WatchEvent
from tests.fakes.kubernetes.tables import table, wants_table
from tests.providers.fake_http import ApiError, Call, FakeApi, Reply, Streamed

__all__ = ["KubeApi"]

Obj = dict[str, Any]
_NAMESPACED = "pods|events|services|secrets|persistentvolumeclaims"
_CLUSTER = "nodes|namespaces"
_NS = r"/api/v1/namespaces/(?P<namespace>[^/]+)"
_POD = _NS + r"/pods/(?P<name>[^/]+)"
VERSION = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.23.4",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def _true(value: str | None) -> bool:
    return (value or "").lower() in ("1", "t", "true")


def _merge(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (null removes a key)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge(result.get(key), value)
    return result


def _client_gone(connection: socket.socket) -> bool:
    """Whether the client of a stream closed its end (a streaming client sends nothing more)."""
    readable, _, _ = select.select([connection], [], [], 0)
    if not readable:
        return False
    try:
        if not isinstance(connection, ssl.SSLSocket):
            return connection.recv(1, socket.MSG_PEEK) == b""
        connection.setblocking(False)
        try:
            return connection.recv(1) == b""  # TLS cannot peek; close_notify reads as EOF
        finally:
            connection.setblocking(True)
    except (ssl.SSLWantReadError, BlockingIOError):
        return False
    except OSError:
        return True


def _chunked(handler: BaseHTTPRequestHandler, content_type: str) -> Callable[[bytes], None]:
    handler.close_connection = True
    handler.send_response(200)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Transfer-Encoding", "chunked")
    handler.send_header("Cache-Control", "no-cache, private")
    handler.end_headers()

    def write(data: bytes) -> None:
        handler.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        handler.wfile.flush()

    return write


class KubeApi(FakeApi):
    def __init__(self, store: Store, kubelet: Kubelet, token: str, require_token: bool) -> None:
        super().__init__()
        self.store, self.kubelet, self.token, self.require_token = store, kubelet, token, require_token
        self.protocol_version = "HTTP/1.1"
        self.stopping = threading.Event()
        for method, pattern, handler in self._table():
            self.route(method, pattern, self._guarded(handler))

    def _table(self) -> list[tuple[str, str, Callable[[Call], Reply]]]:
        collection = rf"/api/v1(?:/namespaces/(?P<namespace>[^/]+))?/(?P<resource>{_NAMESPACED})"
        cluster = rf"/api/v1/(?P<resource>{_CLUSTER})"
        item = _NS + rf"/(?P<resource>{_NAMESPACED})/(?P<name>[^/]+)"
        cluster_item = rf"/api/v1/(?P<resource>{_CLUSTER})/(?P<name>[^/]+)"
        routes: list[tuple[str, str, Callable[[Call], Reply]]] = [
            ("GET", "/version", lambda call: (200, VERSION)),
            ("GET", "/(?:healthz|readyz|livez)", lambda call: (200, "ok")),
            ("GET", "/api", self._api_versions),
            ("GET", "/apis", lambda call: (200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": []})),
            ("GET", "/api/v1", lambda call: (200, api_resource_list())),
            ("POST", _POD + "/eviction", self._evict),
            ("GET", _POD + "/log", self._log),
            ("GET", _POD + "/status", self._get),
            ("GET", _POD + "/exec", self._exec),
            ("POST", _POD + "/exec", self._exec),
        ]
        for pattern in (collection, cluster):
            routes += [
                ("GET", pattern, self._list),
                ("POST", pattern, self._create),
                ("DELETE", pattern, self._delete_collection),
            ]
        for pattern in (item, cluster_item):
            routes += [
                ("GET", pattern, self._get),
                ("DELETE", pattern, self._delete),
                ("PUT", pattern, self._replace),
                ("PATCH", pattern, self._patch),
            ]
        return routes

    def _guarded(self, handler: Callable[[Call], Reply]) -> Callable[[Call], Reply]:
        def guarded(call: Call) -> Reply:
            sent = call.headers.get("authorization")
            if sent != f"Bearer {self.token}" and (sent is not None or self.require_token):
                return 401, status(401, "Unauthorized", "Unauthorized")
            call.match.setdefault("resource", "pods")
            try:
                return handler(call)
            except StatusError as error:
                return error.code, error.body

        return guarded

    def error_body(self, error: ApiError) -> Any:
        return status(error.status, error.code, error.message)

    # -- discovery ------------------------------------------------------------------------------
    def _api_versions(self, call: Call) -> Reply:
        host = call.headers.get("host", "127.0.0.1")
        cidrs = [{"clientCIDR": "0.0.0.0/0", "serverAddress": host}]
        return 200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": cidrs}

    # -- reads ----------------------------------------------------------------------------------
    def _where(self, call: Call) -> tuple[str, str]:
        resource = call.match["resource"]
        namespace = call.match.get("namespace") or ""
        known = self.store.find("namespaces", "", namespace) is not None
        if RESOURCES[resource].namespaced and namespace and not known and call.method == "POST":
            raise not_found("namespaces", namespace)
        return resource, namespace

    def _list(self, call: Call) -> Reply:
        resource, namespace = self._where(call)
        labels = label_selector(call.query.get("labelSelector", ""))
        fields = field_selector(resource, call.query.get("fieldSelector", ""))

        def selector(obj: Obj) -> bool:
            return labels(obj) and fields(obj)

        scope = namespace if RESOURCES[resource].namespaced and namespace else None
        if _true(call.query.get("watch")):
            timeout = float(call.query.get("timeoutSeconds") or 1800)
            since = call.query.get("resourceVersion", "")
            events = self.store.watch(
                resource, scope, selector, since, self.stopping.is_set, time.monotonic() + timeout
            )
            rows = resource if wants_table(call.headers.get("accept", "")) else None
            return 200, Streamed(lambda handler: self._stream(handler, events, rows))
        items, revision = self.store.list(resource, scope, selector)
        offset = int(base64.b64decode(call.query["continue"]).decode()) if call.query.get("continue") else 0
        limit = int(call.query.get("limit") or 0)
        page = items[offset : offset + limit] if limit else items[offset:]
        meta: Obj = {"resourceVersion": str(revision)}
        if limit and offset + limit < len(items):
            meta["continue"] = base64.b64encode(str(offset + limit).encode()).decode()
            meta["remainingItemCount"] = len(items) - offset - limit
        if wants_table(call.headers.get("accept", "")):
            return 200, table(resource, page, str(revision))
        kind = RESOURCES[resource].kind
        return 200, {"kind": f"{kind}List", "apiVersion": "v1", "metadata": meta, "items": page}

    def _stream(
        self, handler: BaseHTTPRequestHandler, events: Iterator[WatchEvent | None], rows: str | None
    ) -> None:
        """Watch events as chunked JSON lines; ``rows``: as one-row Tables of that resource (``kubectl
        get -w``), the columns in the first only, as the API server sends them."""
        write = _chunked(handler, "application/json")
        first = True
        try:
            for event in events:
                if event is None:
                    if _client_gone(handler.connection):
                        return
                    continue
                kind, obj = event
                if rows is not None and kind != "ERROR":
                    obj = table(rows, [obj], obj["metadata"]["resourceVersion"])
                    obj["columnDefinitions"] = obj["columnDefinitions"] if first else []
                    first = False
                write(json.dumps({"type": kind, "object": obj}).encode() + b"\n")
            write(b"")
        except OSError:
            return

    def _get(self, call: Call) -> Reply:
        resource, namespace = self._where(call)
        obj = self.store.get(resource, namespace, call.match["name"])
        if wants_table(call.headers.get("accept", "")):
            return 200, table(resource, [obj], obj["metadata"]["resourceVersion"])
        return 200, obj

    # -- writes ---------------------------------------------------------------------------------
    def _create(self, call: Call) -> Reply:
        resource, namespace = self._where(call)
        obj = call.body if isinstance(call.body, dict) else None
        if obj is None:
            raise StatusError(400, "BadRequest", "the request body must be a JSON object")
        meta = obj.setdefault("metadata", {})
        if RESOURCES[resource].namespaced:
            if not namespace:
                raise StatusError(
                    405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
                )
            if meta.get("namespace") not in (None, "", namespace):
                message = (
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
                raise StatusError(400, "BadRequest", message)
        obj = copy.deepcopy(obj)
        admit(resource, obj)
        if _true(call.query.get("dryRun")) or call.query.get("dryRun") == "All":
            return 201, obj
        return 201, self.store.create(resource, namespace, obj)

    def _replace(self, call: Call) -> Reply:
        resource, namespace = self._where(call)
        current = self.store.get(resource, namespace, call.match["name"])
        obj = copy.deepcopy(call.body)
        if "status" in current:
            obj["status"] = current["status"]
        return 200, self.store.replace(resource, namespace, call.match["name"], obj)

    def _patch(self, call: Call) -> Reply:
        resource, namespace = self._where(call)
        kind = call.headers.get("content-type", "").split(";")[0]
        if kind not in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
            raise StatusError(
                415, "UnsupportedMediaType", f"the body of the request was in an unknown format: {kind}"
            )
        patch = dict(call.body or {})
        patch.pop("status", None)

        def apply(obj: Obj) -> None:
            merged = _merge(obj, patch)
            merged["metadata"].update({k: obj["metadata"][k] for k in ("uid", "creationTimestamp", "name")})
            obj.clear()
            obj.update(merged)

        return 200, self.store.update(resource, namespace, call.match["name"], apply)

    def _delete(self, call: Call) -> Reply:
        resource, namespace = self._where(call)
        name = call.match["name"]
        options = call.body if isinstance(call.body, dict) else {}
        grace = call.query.get("gracePeriodSeconds", options.get("gracePeriodSeconds"))
        if resource == "pods":
            return 200, self.delete_pod(namespace, name, None if grace is None else int(grace))
        if resource == "namespaces":
            raise StatusError(405, "MethodNotAllowed", "the fake does not delete namespaces")
        removed = self.store.remove(resource, namespace, name)
        if resource in ("services", "persistentvolumeclaims"):  # these answer with the object
            return 200, removed
        details = {"name": name, "kind": resource, "uid": removed["metadata"]["uid"]}
        return 200, status(200, "", "", details) | {"status": "Success"}

    def _delete_collection(self, call: Call) -> Reply:
        """``deletecollection``: every object the selectors match, each deleted as a DELETE would."""
        resource, namespace = self._where(call)
        if not namespace or resource not in (
            "pods",
            "services",
            "secrets",
            "events",
            "persistentvolumeclaims",
        ):
            raise StatusError(
                405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
            )
        labels = label_selector(call.query.get("labelSelector", ""))
        fields = field_selector(resource, call.query.get("fieldSelector", ""))
        items, _ = self.store.list(resource, namespace, lambda obj: labels(obj) and fields(obj))
        options = call.body if isinstance(call.body, dict) else {}
        grace = call.query.get("gracePeriodSeconds", options.get("gracePeriodSeconds"))
        deleted = []
        for item in items:
            name = item["metadata"]["name"]
            try:
                if resource == "pods":
                    deleted.append(self.delete_pod(namespace, name, None if grace is None else int(grace)))
                else:
                    deleted.append(self.store.remove(resource, namespace, name))
            except StatusError:  # gone meanwhile
                continue
        kind = RESOURCES[resource].kind
        meta = {"resourceVersion": str(self.store.revision)}
        return 200, {"kind": f"{kind}List", "apiVersion": "v1", "metadata": meta, "items": deleted}

    def delete_pod(self, namespace: str, name: str, grace: int | None) -> Obj:
        """Graceful: ``deletionTimestamp`` now, the kubelet stops the containers and removes the pod;
        grace 0, or a pod no kubelet runs, goes at once."""
        with self.store.lock:
            pod = self.store.get("pods", namespace, name)
            if pod["metadata"].get("deletionTimestamp") and grace != 0:
                return pod
            period = int(pod["spec"].get("terminationGracePeriodSeconds", 30)) if grace is None else grace
            idle = not pod["spec"].get("nodeName") or pod["status"].get("phase") in ("Succeeded", "Failed")
            if period == 0 or idle:
                return self.store.remove("pods", namespace, name)

            def terminating(obj: Obj) -> None:
                obj["metadata"]["deletionTimestamp"] = timestamp(time.time() + period)
                obj["metadata"]["deletionGracePeriodSeconds"] = period

            return self.store.update("pods", namespace, name, terminating)

    def disrupt(self, namespace: str, name: str, reason: str, message: str) -> None:
        def condition(obj: Obj) -> None:
            obj["status"].setdefault("conditions", []).append(
                {
                    "type": "DisruptionTarget",
                    "status": "True",
                    "lastProbeTime": None,
                    "lastTransitionTime": timestamp(),
                    "reason": reason,
                    "message": message,
                }
            )

        self.store.update("pods", namespace, name, condition)

    def _evict(self, call: Call) -> Reply:
        namespace, name = call.match["namespace"], call.match["name"]
        body = call.body if isinstance(call.body, dict) else {}
        self.store.get("pods", namespace, name)
        self.disrupt(namespace, name, "EvictionByEvictionAPI", "Eviction API: evicting")
        grace = (body.get("deleteOptions") or {}).get("gracePeriodSeconds")
        self.delete_pod(namespace, name, grace)
        return 201, status(201, "", "")

    # -- pod subresources -----------------------------------------------------------------------
    def _container(self, call: Call) -> tuple[Any, Any]:
        namespace, name = call.match["namespace"], call.match["name"]
        pod = self.store.get("pods", namespace, name)
        phase = pod["status"].get("phase")
        if phase in ("Succeeded", "Failed") and call.path.endswith("/exec"):
            raise StatusError(
                400,
                "BadRequest",
                f"cannot exec into a container in a completed pod; current phase is {phase}",
            )
        names = [c["name"] for c in pod["spec"]["containers"]]
        wanted = urllib.parse.parse_qs(call.raw_query).get("container", [""])[-1]
        if not wanted:
            if len(names) > 1:
                message = (
                    f"a container name must be specified for pod {name}, choose one of: [{' '.join(names)}]"
                )
                raise StatusError(400, "BadRequest", message)
            wanted = names[0]
        if wanted not in names:
            raise StatusError(400, "BadRequest", f"container {wanted} is not valid for pod {name}")
        run = self.kubelet.running(namespace, name)
        if run is None:
            raise StatusError(
                400,
                "BadRequest",
                f'container "{wanted}" in pod "{name}" is waiting to start: ContainerCreating',
            )
        return run, next(c for c in run.containers if c.name == wanted)

    def _exec(self, call: Call) -> Reply:
        run, container = self._container(call)
        return 101, Streamed(exec_session(run, container, call.raw_query, call.headers))

    def _log(self, call: Call) -> Reply:
        run, container = self._container(call)
        path = container.log_file(previous=_true(call.query.get("previous")))
        if not path.exists():
            raise StatusError(
                400,
                "BadRequest",
                f'previous terminated container "{container.name}" in pod "{run.name}" not found',
            )
        tail = call.query.get("tailLines")
        follow = _true(call.query.get("follow"))

        def serve(handler: BaseHTTPRequestHandler) -> None:
            write = _chunked(handler, "text/plain")
            with open(path, "rb") as log:
                data = log.read()
                if tail is not None:
                    lines = data.splitlines(keepends=True)
                    data = b"".join(lines[-int(tail) :]) if int(tail) else b""
                try:
                    if data:
                        write(data)
                    while follow and not self.stopping.is_set():
                        more = log.read()
                        if more:
                            write(more)
                        elif not container.running or _client_gone(handler.connection):
                            break
                        else:
                            time.sleep(0.1)
                    write(b"")
                except OSError:
                    return

        return 200, Streamed(serve)
