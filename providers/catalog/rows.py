"""Reading CSV rows with their line numbers, so a bad value is reported where it is."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

from skyhop.providers.catalog.errors import CatalogError

__all__ = ["CsvRows"]


class CsvRows:
    """The data rows of one CSV file, as dicts, checked against the columns a reader needs."""

    def __init__(self, path: Path, required: tuple[str, ...], layout: str) -> None:
        self.path = path
        self._required = required
        self._layout = layout
        self.line = 1

    def __iter__(self) -> Iterator[dict[str, str]]:
        try:
            handle = self.path.open(newline="", encoding="utf-8")
        except OSError as exc:
            raise CatalogError(str(self.path), 0, f"cannot read it ({exc.strerror})") from None
        with handle:
            reader = csv.reader(handle)
            try:
                header = next(reader)
            except (StopIteration, UnicodeDecodeError, csv.Error):
                raise CatalogError(
                    str(self.path), 1, f"empty or not a CSV file; expected {self._layout}"
                ) from None
            missing = [c for c in self._required if c not in header]
            if missing:
                raise CatalogError(
                    str(self.path),
                    1,
                    f"stale or unknown layout: missing column(s) {', '.join(missing)}; "
                    f"expected {self._layout}. Run 'skyhop catalog update' to regenerate it",
                )
            try:
                for values in reader:
                    self.line = reader.line_num
                    if values:
                        yield dict(zip(header, values, strict=False))
            except (UnicodeDecodeError, csv.Error) as exc:
                raise CatalogError(str(self.path), reader.line_num, f"unreadable row ({exc})") from None

    def error(self, message: str) -> CatalogError:
        """An error about the row being read."""
        return CatalogError(str(self.path), self.line, message)

    def number(self, row: dict[str, str], column: str, *, required: bool = False) -> float | None:
        """The column as a float (None when empty and optional)."""
        text = (row.get(column) or "").strip()
        if not text or text.lower() == "nan":
            if required:
                raise self.error(f"column {column} is empty")
            return None
        try:
            value = float(text)
        except ValueError:
            raise self.error(f"column {column} must be a number, got {text!r}") from None
        if value < 0:
            raise self.error(f"column {column} must not be negative, got {text!r}")
        return value
