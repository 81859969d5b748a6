"""Where skyhop's GCP calls go and for which project: the settings gcloud users already have.

The project comes from ``GOOGLE_CLOUD_PROJECT``, gcloud's ``core/project`` property (its
``CLOUDSDK_CORE_PROJECT`` variable or the active configuration file), or the application default
credentials. The Compute Engine and Cloud TPU endpoints honour gcloud's
``api_endpoint_overrides/compute`` and ``api_endpoint_overrides/tpu`` properties
(``CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE``, ``..._TPU``), used for private endpoints, and by the
tests to reach a local server. So a worker needs no GCP settings of skyhop's own.
"""

from __future__ import annotations

import configparser
import os
import urllib.parse
from pathlib import Path

__all__ = ["api_endpoint", "gcloud_property", "project_setting"]


def _config_dir() -> Path:
    return Path(os.environ.get("CLOUDSDK_CONFIG") or Path.home() / ".config" / "gcloud")


def gcloud_property(section: str, name: str) -> str | None:
    """A gcloud property from its environment variable, else from the active configuration."""
    from_env = os.environ.get(f"CLOUDSDK_{section}_{name}".upper())
    if from_env:
        return from_env
    folder = _config_dir()
    try:
        active = (
            os.environ.get("CLOUDSDK_ACTIVE_CONFIG_NAME") or (folder / "active_config").read_text().strip()
        )
    except OSError:
        active = "default"
    parser = configparser.ConfigParser()
    try:
        parser.read(folder / "configurations" / f"config_{active or 'default'}")
    except configparser.Error:
        return None
    return parser.get(section, name, fallback=None) or None


def project_setting() -> str | None:
    """The project named explicitly (environment or gcloud), before the credentials' own."""
    return os.environ.get("GOOGLE_CLOUD_PROJECT") or gcloud_property("core", "project")


def api_endpoint(api: str) -> str | None:
    """``scheme://host[:port]`` of an overridden Google API (``compute``, ``tpu``); None: the public one."""
    override = gcloud_property("api_endpoint_overrides", api)
    if not override:
        return None
    parts = urllib.parse.urlsplit(override)
    return f"{parts.scheme}://{parts.netloc}" if parts.netloc else override
