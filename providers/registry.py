"""Which providers exist, by name."""

from __future__ import annotations

from providers.base import Provider

__all__ = ["UnknownProviderError", "get_provider", "provider_names"]


class UnknownProviderError(LookupError):
    """A cluster or request names a provider this installation does not have."""


def provider_names() -> list[str]:
    """Names of the providers this installation can launch on."""
    return ["local"]


def get_provider(name: str) -> Provider:
    """The provider called ``name``."""
    if name == "local":
        from providers.local import LocalProvider

        return LocalProvider()
    raise UnknownProviderError(
        f"provider {name!r} is not available; available: {', '.join(provider_names())}"
    )
