"""The ``local`` provider: this machine as a cloud with one offering."""

from skyhop.providers.local.provider import LocalProvider

__all__ = ["LocalProvider"]
