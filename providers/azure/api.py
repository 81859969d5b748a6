"""One Azure Resource Manager session: subscription, credential, and the compute/network/resource clients.

Long-running operations are polled by the SDK (``begin_*().result()``), through the same base URL
as the call, so the local test server serves their ``Azure-AsyncOperation``/``Location`` URLs too.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from skyhop.providers.azure import config
from skyhop.providers.errors import CredentialsError

__all__ = ["EVICTED", "SETUP_HINT", "ArmApi"]

EVICTED = "Microsoft.Compute/virtualMachines/evictSpotVM/action"
"""The Activity Log operation Azure records when it evicts a spot VM (scale sets have their own)."""
_ACTIVITY_LOG_API = "2015-04-01"

SETUP_HINT = (
    "run 'az login' (and 'az account set --subscription ID'), or set AZURE_SUBSCRIPTION_ID with "
    "AZURE_TENANT_ID, AZURE_CLIENT_ID and AZURE_CLIENT_SECRET"
)


class ArmApi:
    """Clients for one subscription, authenticated with ``DefaultAzureCredential``."""

    polling_interval_s = 5.0
    """Wait between polls of an operation when ARM sends no Retry-After."""

    def __init__(self) -> None:
        from azure.core.pipeline.policies import SansIOHTTPPolicy
        from azure.identity import DefaultAzureCredential
        from azure.mgmt.compute import ComputeManagementClient
        from azure.mgmt.network import NetworkManagementClient
        from azure.mgmt.resource.resources import ResourceManagementClient

        subscription = config.subscription_id()
        if not subscription:
            raise CredentialsError("no Azure subscription is set", "NoSubscription")
        self.subscription: str = subscription
        self.endpoint = config.arm_endpoint()
        self.local = self.endpoint.startswith("http://")
        self.credential = DefaultAzureCredential()
        options: dict[str, Any] = {
            "base_url": self.endpoint,
            "credential_scopes": [f"{self.endpoint}/.default"],
            "polling_interval": self.polling_interval_s,
            "retry_total": 3,
        }
        if self.local:
            options["authentication_policy"] = SansIOHTTPPolicy()
        self.compute = ComputeManagementClient(self.credential, subscription, **options)
        self.network = NetworkManagementClient(self.credential, subscription, **options)
        self.resources = ResourceManagementClient(self.credential, subscription, **options)

    def check(self) -> str:
        """Authenticate and read the subscription's resource groups; who this session is."""
        if not self.local:
            self.credential.get_token(f"{self.endpoint}/.default")
        next(iter(self.resources.resource_groups.list(top=1)), None)
        return f"subscription {self.subscription}" + (f" at {self.endpoint}" if self.local else "")

    def evicted(self, group: str, since: datetime) -> set[str]:
        """Lowercased ids of the VMs in ``group`` Azure evicted since ``since``, from the Activity Log.

        With the ``Delete`` eviction policy an evicted VM is simply gone; the subscription's
        Activity Log (kept 90 days) is where the eviction is recorded. azure-mgmt-monitor is not a
        dependency for one GET, so it goes through the resource client's authenticated pipeline.
        """
        from azure.core.rest import HttpRequest

        url: str | None = (
            f"/subscriptions/{self.subscription}/providers/Microsoft.Insights/eventtypes/management/values"
        )
        params: dict[str, str] | None = {
            "api-version": _ACTIVITY_LOG_API,
            "$filter": f"eventTimestamp ge '{since.isoformat()}' and resourceGroupName eq '{group}'",
            "$select": "operationName,resourceId",
        }
        found: set[str] = set()
        while url:
            response = self.resources.send_request(HttpRequest("GET", url, params=params))
            response.raise_for_status()
            page = response.json()
            found |= {
                event["resourceId"].lower()
                for event in page.get("value", [])
                if event.get("operationName", {}).get("value", "").lower() == EVICTED.lower()
            }
            url, params = page.get("nextLink"), None
        return found
