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

# The I/O errors the SDK's core reports (``kind: ConnectionReset``, ``Connection reset by peer``,
# at connect or at its first call; ``Cancelled`` with ``connection closed`` when the drop comes
# after the HTTP/2 handshake began) when nothing accepted the connection or the listener dropped
# it: the sockets of a dev server that is starting, or restarting on its SQLite file.
_NOT_LISTENING_YET = ("connectionrefused", "connectionreset", "brokenpipe", '"connectionclosed"')


async def connect(config: TemporalConfig, address: str, *, server_starting: bool = False) -> Client:
    """A client for ``address`` whose payloads are JSON (any language can read them) signed with the key.

    A server that says its frontend is not healthy yet is waited for. ``server_starting`` (a
    worker started with its server; the embedded server this command started) also waits through
    a refused or reset connection: to a user's configured address those mean a wrong address or
    a TLS mismatch, which must fail at once.
    """
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
            if not _still_starting(str(exc), server_starting) or time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


def _still_starting(error: str, server_starting: bool) -> bool:
    """Whether ``error`` is a server that is starting (so worth asking again) rather than final."""
    if "not healthy yet" in error:
        return True
    squeezed = error.lower().replace(" ", "")
    return server_starting and any(kind in squeezed for kind in _NOT_LISTENING_YET)
