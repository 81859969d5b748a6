"""Places failover has ruled out: the optimizer never chooses a blocked offering.

An entry's None fields are wildcards, so ``{provider: gcp, zone: us-central1-a}`` blocks one zone,
``{provider: aws, region: us-east-1}`` a region, ``{provider: azure}`` a whole cloud, and
``{provider: aws, instance_type: p5.48xlarge}`` a type everywhere (a quota, say). ``within`` pins
the search to one scope instead: everything outside it is ruled out too.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from skyhop.providers.base import Offering

__all__ = ["Blocked", "Blocklist"]


class Blocked(BaseModel):
    """One blocked scope; None is "any"."""

    model_config = ConfigDict(frozen=True)

    provider: str
    region: str | None = None
    zone: str | None = None
    instance_type: str | None = None

    def blocks(self, offering: Offering) -> bool:
        """Whether ``offering`` lies inside this scope."""
        return (
            self.provider == offering.provider
            and (self.region is None or self.region == offering.region)
            and (self.zone is None or self.zone == offering.zone)
            and (self.instance_type is None or self.instance_type == offering.instance_type)
        )


class Blocklist(BaseModel):
    """What failover has ruled out so far; the optimize activity takes it as input."""

    model_config = ConfigDict(frozen=True)

    entries: list[Blocked] = []
    within: Blocked | None = None
    """A pin: offerings outside this scope are ruled out too (a zone pin admits zoned offerings only)."""

    def blocks(self, offering: Offering) -> bool:
        """Whether any entry, or the pin, rules ``offering`` out.

        A zone entry does not block a region-wide candidate (zone None): one full zone leaves the
        others of the region; failover that tried the whole region blocks the region.
        """
        outside = self.within is not None and not self.within.blocks(offering)
        return outside or any(entry.blocks(offering) for entry in self.entries)

    def with_entry(self, entry: Blocked) -> Blocklist:
        """A copy with one more entry (blocklists travel through workflow history, so never mutate)."""
        return self.model_copy(update={"entries": [*self.entries, entry]})
