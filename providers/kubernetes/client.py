"""One kubeconfig context's API server through the ``kubernetes`` client: its API, its errors
classified for failover, and commands in pods over exec.

The client is synchronous; every call here blocks, and the provider runs them in ``KUBE_THREADS``
so the worker's event loop (heartbeats, other activities) never waits on an API server. Responses
are read as plain JSON mappings (``_preload_content=False``): the SDK's models would be parsed
and then thrown away.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from skyhop.providers.error_table import HTTP_STATUSES, ErrorTable
from skyhop.providers.errors import (
    CapacityError,
    InvalidRequestError,
    ProviderError,
    QuotaError,
)
from skyhop.providers.extras import require_extra
from skyhop.providers.kubernetes.settings import KubernetesSettings
from skyhop.providers.runtime.errors import NodeUnreachableError
from skyhop.providers.runtime.shell import Result

__all__ = [
    "KUBE_THREADS",
    "NODE_CONTAINER",
    "ContextApi",
    "allowed_contexts",
    "classify",
    "context_names",
    "open_context",
]

T = TypeVar("T")
Obj = Mapping[str, Any]

KUBE_THREADS = ThreadPoolExecutor(max_workers=16, thread_name_prefix="skyhop-kube")
"""Threads for blocking API calls: a 2-node launch execs on both pods at once, a watcher on every node."""
NODE_CONTAINER = "node"
"""The container of a pod that is the node: where skyhop runs its commands (``pods.pod_manifest``)."""
_REQUEST_TIMEOUT_S = 10.0
"""Bound on one API request: an unreachable context fails its attempt instead of hanging it."""
_STDIN_CHUNK = 1 << 20

_TABLE = ErrorTable(
    {
        "AlreadyExists": InvalidRequestError,
        "Invalid": InvalidRequestError,
        "Forbidden": CapacityError,
    },
    HTTP_STATUSES,
)
"""Kubernetes ``Status`` reasons. ``Forbidden`` (RBAC) blocks its context only, not every context as
a cloud's credentials error would; a quota refusal is ``Forbidden`` with "exceeded quota" (see
``classify``)."""


def classify(exc: BaseException, context: str) -> ProviderError:
    """The failover class of an error the client raised talking to ``context``."""
    from kubernetes.client.rest import ApiException

    if isinstance(exc, ApiException):
        try:
            body = json.loads(exc.body or "{}")
        except ValueError:
            body = {}
        reason = str(body.get("reason") or exc.reason or "")
        message = f"kubernetes context {context!r}: {body.get('message') or exc.reason}"
        if "exceeded quota" in message:
            return QuotaError(message, "ExceededQuota")
        return _TABLE.error(reason, message, exc.status)
    return CapacityError(f"kubernetes context {context!r} is unreachable: {exc}", "Unreachable")


def context_names(settings: KubernetesSettings) -> tuple[list[str], str | None]:
    """Every context of the kubeconfig, and its current one; ([], None) when there is no kubeconfig."""
    path = settings.kubeconfig_path()
    if not path.exists():  # before the import: planning without a kubeconfig never loads the SDK
        return [], None
    require_extra("kubernetes", "the Kubernetes provider")
    from kubernetes import config

    contexts, current = config.list_kube_config_contexts(config_file=str(path))
    return [c["name"] for c in contexts], (current or {}).get("name")


def allowed_contexts(settings: KubernetesSettings) -> list[str]:
    """The contexts skyhop uses, in order: ``allowed_contexts``, else the current one (else the first)."""
    if settings.allowed_contexts is not None:
        return list(settings.allowed_contexts)
    names, current = context_names(settings)
    return [current] if current else names[:1]


@dataclass
class ContextApi:
    """One context's ``CoreV1Api`` and the namespace skyhop's objects go in."""

    context: str
    namespace: str
    core: Any

    def call(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``method`` (a ``CoreV1Api`` call) as JSON, or its error classified (``ProviderError``)."""
        try:
            response = method(*args, _preload_content=False, _request_timeout=_REQUEST_TIMEOUT_S, **kwargs)
        except Exception as exc:
            raise classify(exc, self.context) from None
        return json.loads(response.data or b"null")

    def pods(self, selector: str) -> list[Obj]:
        """The namespace's pods with the label ``selector``."""
        listed = self.call(self.core.list_namespaced_pod, self.namespace, label_selector=selector)
        return list(listed["items"])

    def events(self, pod: Obj) -> list[Obj]:
        """Events about ``pod``, oldest first: this pod's, not those of an earlier one of its name
        (events outlive their pod by an hour, and a relaunched cluster reuses its pods' names)."""
        meta = pod["metadata"]
        about = f"involvedObject.name={meta['name']},involvedObject.uid={meta['uid']}"
        listed = self.call(self.core.list_namespaced_event, self.namespace, field_selector=about)
        return sorted(listed["items"], key=lambda e: str(e.get("lastTimestamp") or e["metadata"]["name"]))

    def exec(self, pod: str, command: str, stdin: bytes | None, timeout: float) -> Result:
        """Run ``sh -c command`` in the pod's node container (``NODE_CONTAINER``: a pod with a sidecar
        has two, and the API server refuses an exec that names none); ``NodeUnreachableError``
        without an answer."""
        from kubernetes import client
        from kubernetes.stream import stream
        from kubernetes.stream.ws_client import ERROR_CHANNEL
        from websocket import WebSocketConnectionClosedException

        label = f"pod {self.namespace}/{pod} ({self.context})"
        # ``stream`` swaps its client's request method for a WebSocket one while it runs: a client of
        # its own keeps the shared one's concurrent calls (from other threads) plain HTTP.
        own = client.ApiClient(self.core.api_client.configuration)
        try:
            session = stream(
                client.CoreV1Api(own).connect_get_namespaced_pod_exec, pod, self.namespace,
                command=["sh", "-c", command], container=NODE_CONTAINER, stdin=stdin is not None,
                stdout=True, stderr=True, tty=False, binary=True, _preload_content=False,
                _request_timeout=_REQUEST_TIMEOUT_S,
            )  # fmt: skip
        except Exception as exc:
            own.close()
            raise NodeUnreachableError(f"{label}: {exc}") from None
        try:
            if stdin is not None:
                for start in range(0, len(stdin), _STDIN_CHUNK):
                    session.write_stdin(stdin[start : start + _STDIN_CHUNK])
                session.close_channel(0)
            try:
                session.run_forever(timeout=timeout)
            except WebSocketConnectionClosedException:
                # A server that drops the connection right after its close frame fails the client's
                # answering close frame; everything it sent before, the exit status too, was read.
                session.close()
                if not session.peek_channel(ERROR_CHANNEL):
                    raise
            if session.is_open():
                raise NodeUnreachableError(f"{label}: no answer within {timeout:g}s")
            code = session.returncode
            return Result(
                exit_status=255 if code is None else int(code),
                stdout=session.read_stdout() or b"",
                stderr=session.read_stderr() or b"",
            )
        except NodeUnreachableError:
            raise
        except Exception as exc:
            raise NodeUnreachableError(f"{label}: {exc}") from None
        finally:
            session.close()
            own.close()


def open_context(settings: KubernetesSettings, context: str | None) -> ContextApi:
    """The API of ``context`` (the current one if None), its namespace from the settings or the context.

    Reused while the kubeconfig file is unchanged: a client keeps its connection pool across calls.
    """
    require_extra("kubernetes", "the Kubernetes provider")
    path = str(settings.kubeconfig_path())
    try:
        stamp = os.stat(path).st_mtime_ns
    except OSError as exc:
        raise CapacityError(f"kubeconfig {path}: {exc.strerror}", "NoKubeconfig") from None
    key = (path, stamp, context, settings.namespace)
    if key not in _OPENED:
        _OPENED[key] = _open(path, settings.namespace, context)
    return _OPENED[key]


_OPENED: dict[tuple[str, int, str | None, str | None], ContextApi] = {}


def _open(path: str, namespace: str | None, context: str | None) -> ContextApi:
    from kubernetes import client, config

    try:
        contexts, current = config.list_kube_config_contexts(config_file=path)
    except Exception as exc:
        raise CapacityError(f"kubeconfig {path}: {exc}", "NoKubeconfig") from None
    by_name = {c["name"]: c for c in contexts}
    name = str(context or (current or {}).get("name"))
    if name not in by_name:
        raise CapacityError(f"kubeconfig {path} has no context {name!r}", "NoSuchContext")
    chosen = namespace or by_name[name]["context"].get("namespace") or "default"
    api = client.CoreV1Api(config.new_client_from_config(config_file=path, context=name))
    return ContextApi(name, chosen, api)
