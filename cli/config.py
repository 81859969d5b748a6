"""Where skyhop's Temporal is: configured (env or ``~/.skyhop/config.yaml``) or the embedded default.

Environment variables win over the config file:

- ``SKYHOP_TEMPORAL_ADDRESS`` (``temporal.address``): host:port of a Temporal frontend;
  when set, skyhop starts nothing and connects.
- ``SKYHOP_TEMPORAL_NAMESPACE`` (``temporal.namespace``): default ``default``.
- ``SKYHOP_TEMPORAL_TLS`` (``temporal.tls``): ``true`` to use TLS (implied by an API key).
- ``SKYHOP_TEMPORAL_TLS_CERT``, ``_KEY``, ``_CA`` (``temporal.tls_cert``, ``tls_key``, ``tls_ca``):
  mTLS client certificate, key and server CA, as file paths.
- ``SKYHOP_TEMPORAL_API_KEY`` (``temporal.api_key``): API key, e.g. for Temporal Cloud.
- ``SKYHOP_SERVER_PORT``, ``SKYHOP_UI_PORT`` (``server.port``, ``server.ui_port``): the embedded
  server's gRPC and Web UI ports, default 17233 and 18233.
- ``SKYHOP_KEY`` (base64 of 32 bytes; several, comma-separated, newest first, during a rotation) or
  ``SKYHOP_KEY_FILE`` (``temporal.key_file``; one key per line): the keyring that encrypts every
  payload (``contract/codec.py``); default ``~/.skyhop/key``, created on first use. The CLI and
  every worker must use the same keys. The key itself is never read from
  ``config.yaml``, which is not meant to be a secret.
- ``SKYHOP_STORE_URL``, ``SKYHOP_STORE_ENDPOINT_URL`` (``store.url``, ``store.endpoint_url``): the
  content store that task files travel through (``storage.content.StoreConfig``);
  ``SKYHOP_STORE_ACCESS_KEY_ID`` and ``SKYHOP_STORE_SECRET_ACCESS_KEY`` (environment only): its own keys.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from skyhop.providers.home import skyhop_home

__all__ = ["ConfigError", "TemporalConfig", "load_config"]

DEFAULT_PORT = 17233
DEFAULT_UI_PORT = 18233
DEFAULT_CODEC_PORT = 18234


class ConfigError(ValueError):
    """``config.yaml`` or a SKYHOP_* variable is invalid."""


@dataclass(frozen=True)
class TemporalConfig:
    """How to reach Temporal. ``address`` None means: use (and if needed start) the embedded server."""

    address: str | None = None
    namespace: str = "default"
    tls: bool = False
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_ca: str | None = None
    api_key: str | None = None
    port: int = DEFAULT_PORT
    """Embedded server gRPC port."""
    ui_port: int = DEFAULT_UI_PORT
    """Embedded server Web UI port."""
    key: str | None = None
    """The payload key as base64 (``SKYHOP_KEY``); wins over ``key_file``."""
    key_file: str | None = None
    """Where the payload key is; None means ``~/.skyhop/key`` (created on first use)."""

    @property
    def embedded(self) -> bool:
        """Whether skyhop runs its own dev server and worker."""
        return self.address is None


_SECTIONS = ("temporal", "server", "store", "r2", "minio", "kubernetes")
"""The file's top-level keys: ``store`` is read by ``storage.content.load_store_config``, ``r2`` by
``storage.s3``, ``kubernetes`` by the provider (``providers/kubernetes/settings.py``)."""


def _read_file() -> dict[str, Any]:
    path = skyhop_home() / "config.yaml"
    if not path.exists():
        return {}
    import yaml

    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({exc})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping with 'temporal' and/or 'server' keys")
    unknown = set(data) - set(_SECTIONS)
    if unknown:
        raise ConfigError(f"{path}: unknown key {sorted(unknown)[0]!r}; allowed: {', '.join(_SECTIONS)}")
    store = data.get("store")
    if store is not None and (not isinstance(store, dict) or set(store) - {"url", "endpoint_url"}):
        raise ConfigError(f"{path}: store: expected a mapping with 'url' and/or 'endpoint_url'")
    return data


def load_config() -> TemporalConfig:
    """The effective configuration."""
    data = _read_file()
    temporal = data.get("temporal") or {}
    server = data.get("server") or {}

    def pick(env: str, section: dict[str, Any], key: str) -> Any:
        return os.environ.get(env) or section.get(key)

    api_key = pick("SKYHOP_TEMPORAL_API_KEY", temporal, "api_key")
    tls = str(pick("SKYHOP_TEMPORAL_TLS", temporal, "tls") or "").lower() in ("1", "true", "yes")
    try:
        port = int(pick("SKYHOP_SERVER_PORT", server, "port") or DEFAULT_PORT)
        ui_port = int(pick("SKYHOP_UI_PORT", server, "ui_port") or DEFAULT_UI_PORT)
    except ValueError:
        raise ConfigError(
            "server.port and server.ui_port (SKYHOP_SERVER_PORT, SKYHOP_UI_PORT) must be integers"
        ) from None
    return TemporalConfig(
        address=pick("SKYHOP_TEMPORAL_ADDRESS", temporal, "address"),
        namespace=pick("SKYHOP_TEMPORAL_NAMESPACE", temporal, "namespace") or "default",
        tls=tls or bool(api_key),
        tls_cert=pick("SKYHOP_TEMPORAL_TLS_CERT", temporal, "tls_cert"),
        tls_key=pick("SKYHOP_TEMPORAL_TLS_KEY", temporal, "tls_key"),
        tls_ca=pick("SKYHOP_TEMPORAL_TLS_CA", temporal, "tls_ca"),
        api_key=api_key,
        port=port,
        ui_port=ui_port,
        key=os.environ.get("SKYHOP_KEY") or None,
        key_file=pick("SKYHOP_KEY_FILE", temporal, "key_file"),
    )
