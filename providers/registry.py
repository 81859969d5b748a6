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
from typing import TYPE_CHECKING

from providers.base import Capabilities, CheckResult, Provider
from providers.home import skyhop_home

if TYPE_CHECKING:
    from spec import Task

__all__ = [
    "PLANNED_PROVIDERS",
    "UnknownProviderError",
    "all_provider_names",
    "check_cache_path",
    "disabled_provider_names",
    "get_provider",
    "pinned_refusal",
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
PLANNED_PROVIDERS = {"kubernetes": "Kubernetes", "k8s": "Kubernetes"}
"""Named in SkyPilot's YAML (``k8s/<context>``) but not built yet: refused, saying so, never mistaken
for a typo."""
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
    return _provider_class(name)()


def _provider_class(name: str) -> type[Provider]:
    target = _PROVIDERS.get(name)
    if target is None:
        raise UnknownProviderError(
            f"provider {name!r} is not available; available: {', '.join(all_provider_names())}"
        )
    module, cls = target.split(":")
    provider: type[Provider] = getattr(importlib.import_module(module), cls)
    return provider


def pinned_refusal(task: Task) -> tuple[str, str] | None:
    """``(field, reason)`` when every provider ``task`` is pinned to lacks something it needs, else None.

    What ``Provider.unsupported`` would find only once an attempt reached the provider, said before
    anything starts. A task that may run anywhere, or on one provider that can, is not refused.
    """
    reasons: list[tuple[str, str]] = []
    for resources in task.resources.alternatives:
        name = resources.cloud
        if name is None or name not in _PROVIDERS:
            return None
        reason = _lacks(name, _provider_class(name).capabilities, task)
        if reason is None:
            return None
        reasons.append(reason)
    return reasons[0]


def _lacks(name: str, capabilities: Capabilities, task: Task) -> tuple[str, str] | None:
    if capabilities.max_nodes is not None and task.num_nodes > capabilities.max_nodes:
        return "num_nodes", f"{name} runs at most {capabilities.max_nodes} nodes, got {task.num_nodes}"
    if not capabilities.absolute_paths:
        absolute = next((t for t in task.file_mounts if t.startswith("/")), None)
        if absolute is not None:
            return "file_mounts", (
                f"target {absolute!r} is absolute, but a {name} node is a folder on this machine and its "
                "jobs see this machine's files; use a path under ~ (like ~/data.csv)"
            )
    return None
