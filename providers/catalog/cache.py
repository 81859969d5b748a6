"""A parsed-catalog cache: CSV parsing costs ~50 ms per 50k rows, unpickling a fifth of that.

Entries live in ``~/.skyhop/catalogs/cache/`` keyed by the file's path, size and mtime (and the
reader's version), so an edited or regenerated catalog is re-read and a stale entry is never used.
Writes go through a temporary file and a rename, so concurrent readers see whole entries only.
"""

from __future__ import annotations

import gc
import hashlib
import os
import pickle
from collections.abc import Callable
from pathlib import Path

from skyhop.providers.catalog.model import Catalog
from skyhop.providers.home import skyhop_home

__all__ = ["FileStamp", "cached_catalog", "file_stamp"]

_FORMAT = 1
"""Bump when ``Catalog`` or a reader changes, so old entries are ignored."""
_memory: dict[str, Catalog] = {}

FileStamp = tuple[str, int, int]
"""A file's resolved path, size and modification time: what tells its versions apart here."""


def file_stamp(path: Path) -> FileStamp | None:
    """``path``'s stamp; None when it cannot be read."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return str(path.resolve()), stat.st_size, stat.st_mtime_ns


def cached_catalog(path: Path, read: Callable[[], Catalog]) -> Catalog:
    """``read()``'s catalog for ``path``, from memory or disk when the file has not changed."""
    stamp = file_stamp(path)
    if stamp is None:
        return read()  # the reader reports the problem with the file's name
    key = hashlib.sha256("|".join(map(str, (_FORMAT, *stamp))).encode()).hexdigest()[:24]
    if key in _memory:
        return _memory[key]
    entry = skyhop_home() / "catalogs" / "cache" / f"{key}.pickle"
    try:
        catalog: Catalog = _unpickle(entry.read_bytes())
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, TypeError):
        catalog = read()
        _store(entry, catalog)
    _memory[key] = catalog
    return catalog


def _unpickle(data: bytes) -> Catalog:
    """Unpickle with the cyclic GC paused: ~100k small tuples would trigger it dozens of times."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        catalog: Catalog = pickle.loads(data)
        return catalog
    finally:
        if enabled:
            gc.enable()


def _store(entry: Path, catalog: Catalog) -> None:
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        partial = entry.with_suffix(f".{os.getpid()}.tmp")
        partial.write_bytes(pickle.dumps(catalog, protocol=pickle.HIGHEST_PROTOCOL))
        partial.replace(entry)
    except OSError:
        pass  # a read-only home only costs speed
