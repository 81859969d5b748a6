"""Errors of reading catalogs.

CatalogError
 └── (message names the file and line, and what to do)
"""

from __future__ import annotations

__all__ = ["CatalogError"]


class CatalogError(Exception):
    """A catalog file is missing, unreadable, stale (unknown layout) or has a bad row.

    Attributes:
        path: the file.
        line: 1-based line number, or 0 when the file as a whole is the problem.
    """

    def __init__(self, path: str, line: int, message: str) -> None:
        self.path = path
        self.line = line
        where = f"{path}:{line}" if line else path
        super().__init__(f"catalog {where}: {message}")
