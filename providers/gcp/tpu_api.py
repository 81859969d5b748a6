"""The Cloud TPU API (v2, REST) with the Compute Engine session's credentials: nodes and their operations.

google-cloud-compute has no TPU client, so the calls go through google-auth's ``AuthorizedSession``
(the token is refreshed as needed) to ``tpu.googleapis.com``, or the ``api_endpoint_overrides/tpu``
gcloud property. Every failure comes out classified (``classify_rpc``); transient ones are retried
here for a bounded time, as the Compute Engine clients retry theirs.
"""

from __future__ import annotations

import time
from typing import Any

from skyhop.providers.errors import CredentialsError, TransientError
from skyhop.providers.gcp import config
from skyhop.providers.gcp.errors import classify_rpc

__all__ = ["TpuApi"]

_PUBLIC = "https://tpu.googleapis.com"


class TpuApi:
    """Cloud TPU nodes of one project."""

    call_timeout_s = 60.0
    retry_timeout_s = 60.0
    operation_timeout_s = 1800.0
    """A TPU VM takes minutes to create; its operation may run this long before the attempt gives up."""
    operation_poll_s = 5.0

    def __init__(self, credentials: Any, project: str) -> None:
        from google.api_core.retry import Retry
        from google.auth.transport.requests import AuthorizedSession

        self.project = project
        self._session = AuthorizedSession(credentials)  # type: ignore[no-untyped-call]
        self._base = f"{config.api_endpoint('tpu') or _PUBLIC}/v2"
        self._retry = Retry(
            predicate=lambda exc: isinstance(exc, TransientError),
            initial=0.5,
            maximum=8.0,
            timeout=self.retry_timeout_s,
        )

    def _location(self, zone: str) -> str:
        return f"projects/{self.project}/locations/{zone}"

    def _call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        """One request, its transient failures retried; the JSON answer, or the classified error."""
        return self._retry(self._once)(method, path, **kwargs)

    def _once(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        import requests

        try:
            response = self._session.request(  # type: ignore[no-untyped-call]
                method, f"{self._base}/{path}", timeout=self.call_timeout_s, **kwargs
            )
        except requests.RequestException as exc:
            raise TransientError(str(exc), type(exc).__name__) from exc
        try:
            body = response.json() if response.content else {}
        except ValueError:
            body = {}
        if response.status_code >= 400:
            error = body.get("error", {}) if isinstance(body, dict) else {}
            message = str(error.get("message") or response.reason or f"HTTP {response.status_code}")
            reasons = [d.get("reason") for d in error.get("details", []) if isinstance(d, dict)]
            if "SERVICE_DISABLED" in reasons:
                raise CredentialsError(message, "SERVICE_DISABLED")
            raise classify_rpc(str(error.get("status", "")), message, response.status_code)
        return body if isinstance(body, dict) else {}

    def create(self, zone: str, node_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """Start creating node ``node_id``; the long-running operation (``ALREADY_EXISTS`` raises)."""
        return self._call("POST", f"{self._location(zone)}/nodes", params={"nodeId": node_id}, json=body)

    def get(self, zone: str, node_id: str) -> dict[str, Any]:
        """The node (``NOT_FOUND`` raises)."""
        return self._call("GET", f"{self._location(zone)}/nodes/{node_id}")

    def delete(self, zone: str, node_id: str) -> dict[str, Any]:
        """Start deleting the node; the long-running operation."""
        return self._call("DELETE", f"{self._location(zone)}/nodes/{node_id}")

    def nodes(self, zone: str = "-") -> list[dict[str, Any]]:
        """Every node in ``zone`` (``-``: every zone), following pages."""
        found: list[dict[str, Any]] = []
        token = ""
        while True:
            params = {"pageToken": token} if token else {}
            page = self._call("GET", f"{self._location(zone)}/nodes", params=params)
            found += page.get("nodes", [])
            token = page.get("nextPageToken", "")
            if not token:
                return found

    def wait(self, operation: dict[str, Any]) -> None:
        """Poll ``operation`` until it is done; raise its error, classified."""
        deadline = time.monotonic() + self.operation_timeout_s
        while not operation.get("done"):
            if time.monotonic() > deadline:
                raise TransientError(
                    f"operation {operation.get('name')} is still running", "OperationTimeout"
                )
            time.sleep(self.operation_poll_s)
            operation = self._call("GET", str(operation["name"]))
        error = operation.get("error")
        if error:
            raise classify_rpc(int(error.get("code") or 0), str(error.get("message") or "operation failed"))
