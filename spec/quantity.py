"""SkyPilot-style resource quantities: ``4`` (exactly), ``4+`` (at least), memory ``x4`` (per vCPU)."""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Quantity", "parse_disk_size", "parse_memory", "parse_quantity"]

_NUMBER = r"(\d+(?:\.\d+)?|\.\d+)"
_PLAIN = re.compile(rf"^{_NUMBER}(\+?)$")
_PER_CPU = re.compile(rf"^(?:x{_NUMBER}|{_NUMBER}x)(\+?)$")
_UNITS = {"": 1.0, "kb": 1 / 1024**2, "mb": 1 / 1024, "gb": 1.0, "tb": 1024.0, "pb": 1024.0**2}
_WITH_UNIT = re.compile(rf"^{_NUMBER}\s*([kmgtp]b)(\+?)$", re.IGNORECASE)


@dataclass(frozen=True)
class Quantity:
    """A requested amount: ``value`` exactly, or at least ``value`` when ``at_least``.

    ``per_cpu`` (memory only) means the value is GiB per vCPU of the chosen instance.
    """

    value: float
    at_least: bool = False
    per_cpu: bool = False

    def admits(self, offered: float, cpus: float = 0.0) -> bool:
        """Whether an offering with ``offered`` units (and ``cpus`` vCPUs) satisfies this."""
        wanted = self.value * cpus if self.per_cpu else self.value
        if self.at_least or self.per_cpu:
            return offered + 1e-9 >= wanted
        return abs(offered - wanted) < 1e-6

    def fits_within(self, free: float, cpus: float) -> bool:
        """Whether ``free`` units (of a node with ``cpus`` vCPUs asked for) leave room for this."""
        wanted = self.value * cpus if self.per_cpu else self.value
        return wanted <= free + 1e-9

    def __str__(self) -> str:
        number = f"{self.value:g}"
        if self.per_cpu:
            return f"x{number}"
        return f"{number}+" if self.at_least else number


def parse_quantity(raw: object, what: str) -> Quantity:
    """Parse ``4``, ``4.5`` or ``"4+"``; raise ValueError naming what is allowed."""
    text = str(raw).strip() if isinstance(raw, int | float | str) and not isinstance(raw, bool) else ""
    match = _PLAIN.match(text)
    if not match or float(match.group(1)) <= 0:
        raise ValueError(f"{what} must be a positive number or '<number>+', got {raw!r}")
    return Quantity(float(match.group(1)), at_least=bool(match.group(2)))


def parse_memory(raw: object) -> Quantity:
    """Parse GiB (``16``, ``16+``, ``512MB``) or per-vCPU (``x4``, ``4x``) memory."""
    text = str(raw).strip() if isinstance(raw, int | float | str) and not isinstance(raw, bool) else ""
    per_cpu = _PER_CPU.match(text)
    if per_cpu:
        value = float(per_cpu.group(1) or per_cpu.group(2))
        if value > 0:
            return Quantity(value, at_least=True, per_cpu=True)
    with_unit = _WITH_UNIT.match(text)
    if with_unit and float(with_unit.group(1)) > 0:
        gib = float(with_unit.group(1)) * _UNITS[with_unit.group(2).lower()]
        return Quantity(gib, at_least=bool(with_unit.group(3)))
    try:
        return parse_quantity(raw, "memory")
    except ValueError:
        raise ValueError(
            f"memory must be GiB like 16 or '16+', a size like '512MB', or per-vCPU like 'x4', got {raw!r}"
        ) from None


_DISK_SIZE = re.compile(r"^(\d+)\s*([kmgtp]?b?)$", re.IGNORECASE)
_BYTES_PER = {"": 1024**3, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4, "p": 1024**5}


def parse_disk_size(raw: object) -> int:
    """SkyPilot's disk size: GB as a number, or a size like ``1024GB``, ``1T``, ``512G``; GiB rounded up."""
    match = _DISK_SIZE.match(raw.strip()) if isinstance(raw, str) else None
    if not match:
        raise ValueError(f"disk_size must be GB like 256, or a size like '1024GB' or '1T', got {raw!r}")
    unit = match.group(2).lower().removesuffix("b") if match.group(2).lower() != "b" else "b"
    size = int(match.group(1)) * _BYTES_PER[unit]
    gib = -(-size // 1024**3)
    if gib <= 0:
        raise ValueError(f"disk_size must be at least 1 GB, got {raw!r}")
    return gib
