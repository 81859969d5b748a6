"""Connecting to Temporal with skyhop's data converter and the effective configuration."""

from __future__ import annotations

from pathlib import Path

from temporalio.client import Client, TLSConfig
from temporalio.contrib.pydantic import pydantic_data_converter

from cli.config import TemporalConfig

__all__ = ["connect"]


async def connect(config: TemporalConfig, address: str) -> Client:
    """A client for ``address`` with pydantic JSON payloads (so any language can read them)."""
    tls: TLSConfig | bool = config.tls
    if config.tls_cert or config.tls_ca:
        tls = TLSConfig(
            client_cert=Path(config.tls_cert).read_bytes() if config.tls_cert else None,
            client_private_key=Path(config.tls_key).read_bytes() if config.tls_key else None,
            server_root_ca_cert=Path(config.tls_ca).read_bytes() if config.tls_ca else None,
        )
    return await Client.connect(
        address,
        namespace=config.namespace,
        tls=tls,
        api_key=config.api_key,
        data_converter=pydantic_data_converter,
    )
