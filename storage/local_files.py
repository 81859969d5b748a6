"""Which object keys a local ``source`` becomes, the same for every store.

A folder's files keep their paths below it (``prefix/sub/file``); a single file lands as
``prefix/<its name>``, as ``BucketStore.upload`` promises.
"""

from __future__ import annotations

from pathlib import Path

from skyhop.storage.errors import StorageError

__all__ = ["upload_keys"]


def upload_keys(source: Path, bucket: str, prefix: str) -> list[tuple[Path, str]]:
    """Each file to upload with its object key, in a stable order; ``StorageError`` if there is none."""
    if not source.exists():
        raise StorageError(bucket, f"local source {source} does not exist")
    base = prefix.strip("/")
    root = source if source.is_dir() else source.parent
    files = [source] if source.is_file() else sorted(p for p in source.rglob("*") if p.is_file())
    return [(path, "/".join(p for p in (base, path.relative_to(root).as_posix()) if p)) for path in files]
