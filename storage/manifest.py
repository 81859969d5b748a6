"""A packed tree's manifest: every path a sync copies, with its content's SHA-256, mode and mtime.

The paths are the ones rsync picks under the workdir's ignore rules (``providers.runtime.sync.
list_files``), so a tree rebuilt from its manifest syncs to the nodes exactly as the folder itself
would have. Mtimes are kept to the nanosecond: a tree rebuilt on a worker looks unchanged to
rsync's quick check for every file that did not change, so only changed files travel to nodes.
The manifest's JSON is canonical (sorted keys, no spaces), so its SHA-256 names it.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, field_validator

from skyhop.providers.runtime.sync import list_files

__all__ = ["Entry", "Manifest", "file_digest", "scan"]

FORMAT: Literal["skyhop-tree-v1"] = "skyhop-tree-v1"


class Entry(BaseModel):
    """One path of the tree, relative to its root (a lone file's name, for a file mount of a file)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str
    kind: Literal["file", "dir", "link"]
    mode: int = 0o644
    mtime_ns: int = 0
    sha256: str | None = None
    """A file's content (its blob)."""
    size: int = 0
    target: str | None = None
    """A symlink's target, as written (rsync ``-a`` copies links as links)."""

    @field_validator("path")
    @classmethod
    def _inside(cls, value: str) -> str:
        parts = value.split("/")
        if not value or value.startswith("/") or any(part in ("", ".", "..") for part in parts):
            raise ValueError(f"manifest path {value!r} must be relative, without '.', '..' or '//'")
        return value


class Manifest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["skyhop-tree-v1"] = FORMAT
    root: Literal["dir", "file"]
    entries: list[Entry]

    def canonical(self) -> bytes:
        return json.dumps(self.model_dump(), sort_keys=True, separators=(",", ":")).encode()

    def digest(self) -> str:
        return hashlib.sha256(self.canonical()).hexdigest()

    @property
    def files(self) -> list[Entry]:
        return [entry for entry in self.entries if entry.kind == "file"]


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as source:
        while chunk := source.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _entry(root: Path, name: str) -> Entry:
    path = root / name
    info = os.lstat(path)
    mode = stat.S_IMODE(info.st_mode)
    relative = name.rstrip("/")
    if stat.S_ISLNK(info.st_mode):
        return Entry(
            path=relative, kind="link", mode=mode, mtime_ns=info.st_mtime_ns, target=os.readlink(path)
        )
    if stat.S_ISDIR(info.st_mode):
        return Entry(path=relative, kind="dir", mode=mode, mtime_ns=info.st_mtime_ns)
    return Entry(
        path=relative,
        kind="file",
        mode=mode,
        mtime_ns=info.st_mtime_ns,
        sha256=file_digest(path),
        size=info.st_size,
    )


async def scan(path: Path) -> Manifest:
    """The manifest of a folder (the paths its ignore rules keep) or of one file; hashes every file."""
    import asyncio

    if path.is_dir():
        names = await list_files(str(path))
        entries = await asyncio.to_thread(lambda: [_entry(path, name) for name in names])
        return Manifest(root="dir", entries=sorted(entries, key=lambda entry: entry.path))
    entry = await asyncio.to_thread(_entry, path.parent, path.name)
    return Manifest(root="file", entries=[entry])
