"""Connecting to Temporal with skyhop's data converter and the effective configuration."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from temporalio.client import Client, TLSConfig

from skyhop.cli.config import TemporalConfig
from skyhop.cli.payload_key import load_keyring
from skyhop.contract.converter import skyhop_data_converter
from skyhop.providers.keys import use_payload_keyring

__all__ = ["connect"]

# How long a server that answers but says its frontend is still starting gets to finish starting.
_STARTING_GRACE_S = 60.0


async def connect(config: TemporalConfig, address: str) -> Client:
    """A client for ``address`` whose payloads are JSON (any language can read them) signed with the key."""
    tls: TLSConfig | bool = config.tls
    if config.tls_cert or config.tls_ca:
        tls = TLSConfig(
            client_cert=Path(config.tls_cert).read_bytes() if config.tls_cert else None,
            client_private_key=Path(config.tls_key).read_bytes() if config.tls_key else None,
            server_root_ca_cert=Path(config.tls_ca).read_bytes() if config.tls_ca else None,
        )
    keyring = load_keyring(config)
    use_payload_keyring(keyring)  # the node SSH key is a deployment secret sealed with it
    converter = skyhop_data_converter(keyring.current)
    deadline = time.monotonic() + _STARTING_GRACE_S
    while True:
        try:
            return await Client.connect(
                address, namespace=config.namespace, tls=tls, api_key=config.api_key, data_converter=converter
            )
        except RuntimeError as exc:
            # A dev server listens before its frontend is ready; a worker started with it (the
            # embedded server, docker-compose) must wait rather than exit. Anything else is final.
            if "not healthy yet" not in str(exc) or time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)
