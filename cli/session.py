"""The user a CLI command acts for, and its Temporal client (the embedded default started if needed)."""

from __future__ import annotations

import getpass
from typing import TYPE_CHECKING

from skyhop.cli.config import load_config

if TYPE_CHECKING:
    from temporalio.client import Client

__all__ = ["current_user", "open_client", "web_ui_url"]


def current_user() -> str:
    """The local user name, recorded on clusters and jobs."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


async def open_client() -> Client:
    """Connect to the configured Temporal, or to the embedded one (started on first use)."""
    from skyhop.cli.client import connect

    config = load_config()
    if config.address is not None:
        return await connect(config, config.address)
    from skyhop.cli.embedded import ensure_running
    from skyhop.cli.output import info

    server = ensure_running(config, on_start=info)
    return await connect(config, server.address, server_starting=True)


def web_ui_url(workflow_id: str) -> str | None:
    """The Web UI page of a workflow on the embedded server, or None when Temporal is external."""
    from urllib.parse import quote

    from skyhop.cli.embedded import read_state

    config = load_config()
    state = read_state() if config.embedded else None
    if state is None:
        return None
    return f"{state.ui_url}/namespaces/{state.namespace}/workflows/{quote(workflow_id, safe='')}"
