"""Optional dependencies come as pip extras; code that needs one asks here before importing it.

A plain ``pip install skyhop`` runs everything on this machine, SSH hosts and the simulated cloud.
The cloud SDKs and the chain solver are large (hundreds of MB together), so each comes with its
extra, as in SkyPilot: ``skyhop[aws]``, ``[gcp]``, ``[azure]``, ``[kubernetes]``, ``[dag]``, or
``[all]``. Asking first turns a missing package into one line saying what to install, instead of an
ImportError from deep inside a call. ``tests/unit/test_extras.py`` checks this table against
``pyproject.toml``.
"""

from __future__ import annotations

import importlib.util

__all__ = ["EXTRAS", "ExtraMissingError", "missing_packages", "require_extra"]

EXTRAS: dict[str, dict[str, str]] = {
    "aws": {"boto3": "boto3"},
    "gcp": {"google.cloud.compute_v1": "google-cloud-compute"},
    "azure": {
        "azure.mgmt.compute": "azure-mgmt-compute",
        "azure.mgmt.network": "azure-mgmt-network",
        "azure.mgmt.resource": "azure-mgmt-resource",
        "azure.identity": "azure-identity",
    },
    "kubernetes": {"kubernetes": "kubernetes"},
    "dag": {"ortools.linear_solver.pywraplp": "ortools"},
}
"""Extra name -> {module it provides: the distribution that ships it}."""


class ExtraMissingError(Exception):
    """A feature needs an extra that is not installed; the message says how to install it."""


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:  # a parent package is missing
        return False


def missing_packages(extra: str) -> list[str]:
    """The extra's distributions whose modules cannot be found (only their parent packages get imported)."""
    return [dist for module, dist in EXTRAS[extra].items() if not _importable(module)]


def require_extra(extra: str, needed_for: str) -> None:
    """Raise ``ExtraMissingError`` ("aws needs boto3: pip install 'skyhop[aws]'") unless it is installed."""
    missing = missing_packages(extra)
    if missing:
        raise ExtraMissingError(f"{needed_for} needs {', '.join(missing)}: pip install 'skyhop[{extra}]'")
