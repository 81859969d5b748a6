"""One Azure Resource Manager session: subscription, credential, and the compute/network/resource clients.

Long-running operations are polled by the SDK (``begin_*().result()``), through the same base URL
as the call, so the local test server serves their ``Azure-AsyncOperation``/``Location`` URLs too.
"""

from __future__ import annotations

from typing import Any

from providers.azure import config
from providers.errors import CredentialsError

__all__ = ["SETUP_HINT", "ArmApi"]

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
