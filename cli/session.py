"""A connected Temporal client for a CLI command, starting the embedded default when needed."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cli.config import load_config

if TYPE_CHECKING:
    from temporalio.client import Client

__all__ = ["open_client"]


async def open_client() -> Client:
    """Connect to the configured Temporal, or to the embedded one (started on first use)."""
    from cli.client import connect

    config = load_config()
    if config.address is not None:
        return await connect(config, config.address)
    from cli.embedded import ensure_running

    server = ensure_running(config)
    return await connect(config, server.address)
