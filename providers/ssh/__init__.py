"""The ``ssh`` provider: named pools of SSH hosts the user owns (``skyhop ssh up pools.yaml``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from skyhop.providers.ssh.provider import SSHProvider

__all__ = ["SSHProvider"]


def __getattr__(name: str) -> Any:
    # Imported on first use: the workflow contract (``contract.ssh_pools``) imports this package's
    # inventory models, and the provider imports that contract.
    if name == "SSHProvider":
        from skyhop.providers.ssh.provider import SSHProvider

        return SSHProvider
    raise AttributeError(name)
