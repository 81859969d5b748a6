"""One authenticated Compute Engine session: credentials, project, the REST clients, operation waits,
and the Cloud TPU API with the same credentials (``tpu_api.py``).

Mutating calls return an operation; ``wait`` blocks on ``zoneOperations.wait`` (or the global one)
until it is done and raises its error, classified. skyhop polls with its own operations clients
because the SDK's ``ExtendedOperation.result()`` polls through a client built without the endpoint
override. Transient HTTP failures are retried by the SDK for a bounded time; the rest surface
classified, so a failure never reaches the workflow as an unknown exception.
"""

from __future__ import annotations

import time
from typing import Any

from skyhop.providers.errors import CredentialsError, TransientError
from skyhop.providers.gcp import config
from skyhop.providers.gcp.errors import classify, classify_operation
from skyhop.providers.gcp.tpu_api import TpuApi

__all__ = ["ComputeApi", "PREEMPTED", "SETUP_HINT"]

PREEMPTED = "compute.instances.preempted"
"""The operation type Compute Engine records when it preempts a spot or preemptible instance."""

SETUP_HINT = (
    "run 'gcloud auth application-default login' and 'gcloud config set project PROJECT', "
    "or set GOOGLE_APPLICATION_CREDENTIALS to a service-account key"
)
_SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]


def _is_transient(exc: Exception) -> bool:
    return isinstance(classify(exc), TransientError)


class ComputeApi:
    """Compute Engine clients for one project, built from application default credentials."""

    call_timeout_s = 60.0
    retry_timeout_s = 60.0
    operation_timeout_s = 900.0

    def __init__(self) -> None:
        import google.auth

        try:
            credentials, adc_project = google.auth.default(scopes=_SCOPES)
        except Exception as exc:
            raise classify(exc) or exc from exc
        project = config.project_setting() or adc_project
        if not project:
            raise CredentialsError("no GCP project is set", "NoProject")
        # Only now the SDK itself (its import takes most of a second): there are credentials to use.
        from google.api_core.client_options import ClientOptions
        from google.api_core.retry import Retry
        from google.cloud import compute_v1

        self.project: str = project
        self.identity = str(getattr(credentials, "service_account_email", "") or "application default user")
        endpoint = config.api_endpoint("compute")
        options = ClientOptions(api_endpoint=endpoint) if endpoint else None
        common: dict[str, Any] = {"credentials": credentials, "transport": "rest", "client_options": options}
        self.instances = compute_v1.InstancesClient(**common)
        self.firewalls = compute_v1.FirewallsClient(**common)
        self.projects = compute_v1.ProjectsClient(**common)
        self._zone_operations = compute_v1.ZoneOperationsClient(**common)
        self._global_operations = compute_v1.GlobalOperationsClient(**common)
        self.tpu = TpuApi(credentials, project)
        self.options: dict[str, Any] = {
            "retry": Retry(predicate=_is_transient, initial=0.5, maximum=8.0, timeout=self.retry_timeout_s),
            "timeout": self.call_timeout_s,
        }

    def preempted_instances(self, zone: str) -> set[str]:
        """Names of the instances in ``zone`` Compute Engine preempted, from the zone's operations:
        a preemption is recorded as a ``compute.instances.preempted`` operation on its instance,
        and with the ``DELETE`` termination action that is what remains of a reclaimed spot VM."""
        pages = self._zone_operations.list(
            request={"project": self.project, "zone": zone, "filter": f'operationType = "{PREEMPTED}"'},
            **self.options,
        )
        return {operation.target_link.rpartition("/")[2] for operation in pages}

    def wait(self, operation: Any, zone: str | None = None) -> None:
        """Block until ``operation`` (zonal, or global when ``zone`` is None) is done; raise its error."""
        from google.cloud import compute_v1

        deadline = time.monotonic() + self.operation_timeout_s
        while operation.status != compute_v1.Operation.Status.DONE:
            if time.monotonic() > deadline:
                raise TransientError(f"operation {operation.name} is still running", "OperationTimeout")
            if zone is None:
                operation = self._global_operations.wait(
                    project=self.project, operation=operation.name, **self.options
                )
            else:
                operation = self._zone_operations.wait(
                    project=self.project, zone=zone, operation=operation.name, **self.options
                )
        if operation.error.errors:
            raise classify_operation(operation.error.errors, operation.http_error_status_code or None)
