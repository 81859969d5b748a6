"""The parsed form of one cloud's catalog, shaped for the optimizer's two questions.

"Which instance types satisfy this request, cheapest first?" looks only at ``types`` (a few
thousand entries); "where can I get this type and at what price?" reads ``locations`` of the one
or two types that won. Accelerators a cloud bills separately and attaches to a host VM (GCP's
T4/V100/P100/P4 on N1) have their own per-zone prices in ``attachable``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Catalog", "InstanceType", "Location"]

Location = tuple[str, str | None, float | None, float | None]
"""(region, zone or None, on-demand $/h or None, spot $/h or None)."""


@dataclass(frozen=True, slots=True)
class InstanceType:
    """An instance type's size; the same in every region that offers it."""

    name: str
    cpus: float
    memory_gib: float
    accelerator: str | None = None
    """Canonical accelerator name (``A100-80GB``) built into the type, or None."""
    accelerator_count: float = 0.0
    accelerator_memory_gib: float | None = None
    """Memory of one accelerator, where known."""


@dataclass(slots=True)
class Catalog:
    """One cloud's offerings, read from ``source``."""

    provider: str
    source: str
    types: dict[str, InstanceType] = field(default_factory=dict)
    locations: dict[str, list[Location]] = field(default_factory=dict)
    """Instance type -> where it is offered (one entry per zone, or per region when zoneless)."""
    attachable: dict[tuple[str, float], list[Location]] = field(default_factory=dict)
    """(canonical accelerator name, count) -> per-zone prices of attaching them to a host VM."""
    accelerator_memory_gib: dict[str, float] = field(default_factory=dict)
    """Canonical accelerator name -> memory of one, for attachable accelerators."""
    min_price: dict[str, float] = field(default_factory=dict)
    """Instance type -> its lowest on-demand price anywhere (for ranking without reading locations)."""

    def add(self, itype: InstanceType, location: Location) -> None:
        """Record that ``itype`` is offered at ``location`` (the first size seen for a name wins)."""
        self.types.setdefault(itype.name, itype)
        self.locations.setdefault(itype.name, []).append(location)
        price = location[2]
        if price is not None and price < self.min_price.get(itype.name, float("inf")):
            self.min_price[itype.name] = price

    def add_attachable(self, name: str, count: float, memory_gib: float | None, location: Location) -> None:
        """Record the price of attaching ``count`` ``name`` accelerators to a host at ``location``."""
        self.attachable.setdefault((name, count), []).append(location)
        if memory_gib:
            self.accelerator_memory_gib.setdefault(name, memory_gib)

    def accelerator_names(self) -> set[str]:
        """Every accelerator name this catalog offers, built in or attachable."""
        names = {t.accelerator for t in self.types.values() if t.accelerator}
        return names | {name for name, _ in self.attachable}
