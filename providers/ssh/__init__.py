"""The ``ssh`` provider: named pools of SSH hosts the user owns (``skyhop ssh up pools.yaml``)."""

from skyhop.providers.ssh.provider import SSHProvider

__all__ = ["SSHProvider"]
