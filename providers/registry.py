"""Which providers exist, by name, and which of them the optimizer may choose.

``skyhop check`` asks every provider whether its credentials are found and usable and caches the
verdicts in ``~/.skyhop/enabled_providers.json``, so optimizing never calls a cloud. A provider the
check disabled is never a candidate. A cloud not checked yet is one: a launch there that meets
missing credentials blocks that cloud and fails over. ``sim`` is a candidate only once a check
enabled it, so no real launch lands on the simulated cloud by accident.
"""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path

from providers.base import CheckResult, Provider
from providers.home import skyhop_home

__all__ = [
    "UnknownProviderError",
    "all_provider_names",
    "check_cache_path",
    "disabled_provider_names",
    "get_provider",
    "provider_names",
    "read_checks",
    "write_checks",
]

_PROVIDERS = {
    "local": "providers.local:LocalProvider",
    "sim": "providers.sim.provider:SimProvider",
    "aws": "providers.aws.provider:AWSProvider",
    "gcp": "providers.gcp.provider:GCPProvider",
    "azure": "providers.azure.provider:AzureProvider",
    "ssh": "providers.ssh:SSHProvider",
}
_ALWAYS_ENABLED = ("local",)
_ONLY_WHEN_CHECKED = ("sim",)


class UnknownProviderError(LookupError):
    """A cluster or request names a provider this installation does not have."""


def all_provider_names() -> list[str]:
    """Every provider this installation knows, enabled or not."""
    return list(_PROVIDERS)


def check_cache_path() -> Path:
    """Where ``skyhop check`` records its verdicts."""
    return skyhop_home() / "enabled_providers.json"


def read_checks() -> dict[str, CheckResult]:
    """The last ``skyhop check`` verdict per provider (empty before the first check)."""
    try:
        raw = json.loads(check_cache_path().read_text())
    except (OSError, ValueError):
        return {}
    return {name: CheckResult.model_validate(value) for name, value in raw.items() if name in _PROVIDERS}


def write_checks(results: dict[str, CheckResult]) -> None:
    """Record verdicts, replacing the file atomically (workers read it while it is rewritten)."""
    path = check_cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({name: r.model_dump() for name, r in results.items()}, indent=2))
    os.replace(tmp, path)


def provider_names() -> list[str]:
    """Names of the providers the optimizer may launch on (see the module's docstring)."""
    checks = read_checks()

    def candidate(name: str) -> bool:
        if name in _ALWAYS_ENABLED:
            return True
        if name in checks:
            return checks[name].enabled
        return name not in _ONLY_WHEN_CHECKED

    return [name for name in _PROVIDERS if candidate(name)]


def disabled_provider_names() -> set[str]:
    """Providers the last ``skyhop check`` disabled: never candidates, whatever catalogs offer."""
    return {name for name, result in read_checks().items() if not result.enabled}


def get_provider(name: str) -> Provider:
    """The provider called ``name`` (enabled or not: an existing cluster can always be taken down)."""
    target = _PROVIDERS.get(name)
    if target is None:
        raise UnknownProviderError(
            f"provider {name!r} is not available; available: {', '.join(all_provider_names())}"
        )
    module, cls = target.split(":")
    provider: Provider = getattr(importlib.import_module(module), cls)()
    return provider
