"""Which Azure subscription skyhop uses, and where Azure Resource Manager is.

The subscription is ``AZURE_SUBSCRIPTION_ID``, else the Azure CLI's default one
(``~/.azure/azureProfile.json``, written by ``az login``; ``AZURE_CONFIG_DIR`` moves it).
``SKYHOP_AZURE_ENDPOINT`` points Resource Manager elsewhere (another cloud, or the tests' local
server); an ``http://`` endpoint is taken as a local emulator and is called without a token,
since azure-core refuses to send bearer tokens over plain HTTP.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

__all__ = ["PUBLIC_ENDPOINT", "arm_endpoint", "subscription_id"]

PUBLIC_ENDPOINT = "https://management.azure.com"


def subscription_id() -> str | None:
    """The subscription to create resources in, or None when none is configured."""
    if os.environ.get("AZURE_SUBSCRIPTION_ID"):
        return os.environ["AZURE_SUBSCRIPTION_ID"]
    folder = Path(os.environ.get("AZURE_CONFIG_DIR") or Path.home() / ".azure")
    try:
        profile = json.loads((folder / "azureProfile.json").read_text(encoding="utf-8-sig"))
    except (OSError, ValueError):
        return None
    default = [s for s in profile.get("subscriptions", []) if s.get("isDefault")]
    return str(default[0]["id"]) if default else None


def arm_endpoint() -> str:
    """Resource Manager's base URL."""
    return os.environ.get("SKYHOP_AZURE_ENDPOINT") or PUBLIC_ENDPOINT
