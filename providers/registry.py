"""Which providers exist, by name, and which of them the optimizer may choose.

``skyhop check`` asks every provider whether its credentials are found and usable and records the
verdicts for the whole deployment: ``state/enabled_providers.json`` in the content store, mirrored
on each machine as ``~/.skyhop/enabled_providers.json`` (``storage/shared_state.py``), so a worker
on another machine follows the CLI's check and optimizing never calls a cloud. A provider the
check disabled is never a candidate. A cloud not checked yet is one: a launch there that meets
missing credentials blocks that cloud and fails over. ``sim`` is a candidate only once a check
enabled it, so no real launch lands on the simulated cloud by accident.

The registry is also the one place the rest of skyhop (spec, optimizer, CLI) asks about a provider
by name: which exist, which aliases are planned, how ``infra`` reads its regions, what it can do
and what to run when it has nothing to offer. Nothing outside ``providers/`` compares a provider's
name with a literal.
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass
from pathlib import Path

from skyhop.providers.base import Capabilities, CheckResult, Provider
from skyhop.providers.home import skyhop_home

__all__ = [
    "ALIASES",
    "CHECKS_STATE",
    "UnknownProviderError",
    "all_provider_names",
    "canonical_name",
    "capabilities_of",
    "check_cache_path",
    "disabled_provider_names",
    "get_provider",
    "nothing_offered",
    "provider_names",
    "read_checks",
    "region_is_path",
    "write_checks",
]


@dataclass(frozen=True)
class _Entry:
    """One provider as the rest of skyhop may ask about it, without importing it."""

    target: str
    """``module:Class`` of its implementation, imported on first use."""
    always_enabled: bool = False
    """A candidate whatever ``skyhop check`` found (``local`` needs no credentials)."""
    only_when_checked: bool = False
    """A candidate only once a check enabled it (``sim``: never chosen by accident)."""
    region_is_path: bool = False
    """Its regions are names that may contain '/' and it has no zones (SSH pools):
    ``infra: <name>/<region>`` takes everything after the first '/' as the region."""
    places: str | None = None
    """What one of its regions is called, for providers whose regions the user sets up."""
    enable_hint: str | None = None
    """How to give it something to offer, when it has nothing."""


_PROVIDERS = {
    "local": _Entry("skyhop.providers.local:LocalProvider", always_enabled=True),
    "sim": _Entry("skyhop.providers.sim.provider:SimProvider", only_when_checked=True),
    "aws": _Entry("skyhop.providers.aws.provider:AWSProvider"),
    "gcp": _Entry("skyhop.providers.gcp.provider:GCPProvider"),
    "azure": _Entry("skyhop.providers.azure.provider:AzureProvider"),
    "ssh": _Entry(
        "skyhop.providers.ssh:SSHProvider",
        region_is_path=True,
        places="SSH node pool",
        enable_hint="register hosts with: skyhop ssh up pools.yaml",
    ),
    "kubernetes": _Entry(
        "skyhop.providers.kubernetes.provider:KubernetesProvider",
        region_is_path=True,
        places="reachable Kubernetes context",
        enable_hint="set kubernetes.kubeconfig or kubernetes.allowed_contexts in ~/.skyhop/config.yaml",
    ),
}
ALIASES = {"k8s": "kubernetes"}
"""Other names SkyPilot's YAML gives a provider (``infra: k8s/<context>``)."""


class UnknownProviderError(LookupError):
    """A cluster or request names a provider this installation does not have."""


def all_provider_names() -> list[str]:
    """Every provider this installation knows, enabled or not."""
    return list(_PROVIDERS)


def canonical_name(name: str) -> str:
    """The provider ``name`` stands for (``k8s`` is ``kubernetes``), lower-cased; unknown names as given."""
    lowered = name.lower()
    return ALIASES.get(lowered, lowered)


CHECKS_STATE = "enabled_providers.json"
"""The verdicts' name among the deployment's shared state."""


def check_cache_path() -> Path:
    """This machine's copy of the deployment's ``skyhop check`` verdicts."""
    return skyhop_home() / CHECKS_STATE


def read_checks() -> dict[str, CheckResult]:
    """The last ``skyhop check`` verdict per provider, from any machine (empty before the first check)."""
    from skyhop.storage.shared_state import mirrored

    path = mirrored(CHECKS_STATE, check_cache_path())
    try:
        raw = json.loads(path.read_text()) if path is not None else {}
    except (OSError, ValueError):
        return {}
    return {name: CheckResult.model_validate(value) for name, value in raw.items() if name in _PROVIDERS}


def write_checks(results: dict[str, CheckResult]) -> None:
    """Record verdicts for every worker (each replaces its copy whole: workers read it meanwhile)."""
    from skyhop.storage.shared_state import publish

    data = json.dumps({name: r.model_dump() for name, r in results.items()}, indent=2).encode()
    publish(CHECKS_STATE, data, check_cache_path())


def provider_names() -> list[str]:
    """Names of the providers the optimizer may launch on (see the module's docstring)."""
    checks = read_checks()

    def candidate(name: str) -> bool:
        entry = _PROVIDERS[name]
        if entry.always_enabled:
            return True
        if name in checks:
            return checks[name].enabled
        return not entry.only_when_checked

    return [name for name in _PROVIDERS if candidate(name)]


def disabled_provider_names() -> set[str]:
    """Providers the last ``skyhop check`` disabled: never candidates, whatever catalogs offer."""
    return {name for name, result in read_checks().items() if not result.enabled}


def get_provider(name: str) -> Provider:
    """The provider called ``name`` (enabled or not: an existing cluster can always be taken down)."""
    return _provider_class(name)()


def _provider_class(name: str) -> type[Provider]:
    entry = _PROVIDERS.get(name)
    if entry is None:
        raise UnknownProviderError(
            f"provider {name!r} is not available; available: {', '.join(all_provider_names())}"
        )
    module, cls = entry.target.split(":")
    provider: type[Provider] = getattr(importlib.import_module(module), cls)
    return provider


def region_is_path(name: str) -> bool:
    """Whether ``infra: <name>/...`` takes the rest, '/' included, as one region (SSH pool names)."""
    entry = _PROVIDERS.get(name)
    return entry is not None and entry.region_is_path


def nothing_offered(name: str, region: str | None) -> str | None:
    """Why ``name`` offers nothing (in ``region``) and how to change that, for providers whose
    regions the user sets up; None for the others."""
    entry = _PROVIDERS.get(name)
    if entry is None or entry.places is None:
        return None
    where = f" {region!r}" if region else ""
    return f"no {entry.places}{where} is up; {entry.enable_hint}"


def capabilities_of(name: str) -> Capabilities | None:
    """What the provider called ``name`` can do, without building it; None for an unknown name."""
    return _provider_class(name).capabilities if name in _PROVIDERS else None
