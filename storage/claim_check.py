"""Temporal's claim-check pattern for a task's files: bytes through the content store, references in history.

``pack`` (the client) uploads a folder or file as blobs by SHA-256 plus a manifest, sending only
blobs the store lacks; the manifest goes last, so finding it means the whole tree is there and a
re-pack of an unchanged tree is one existence check. ``fetch`` (a worker) rebuilds the tree in a
per-manifest cache folder, once per machine: under a lock that dies with its holder, it fills
``<digest>.partial`` and renames it to ``<digest>``, so a worker killed mid-fetch leaves no copy a
retry could take for whole, and the retry (or any later task with the same tree) finds one copy.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import shutil
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from skyhop.spec.packed import ContentRef
from skyhop.storage.content import ContentStore, StoreConfig, blob_key, manifest_key
from skyhop.storage.manifest import Entry, Manifest, scan

__all__ = ["PackReport", "fetch", "fetched_path", "pack"]

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True)
class PackReport:
    """What a pack did: files in the tree, and the blobs and bytes it had to upload."""

    files: int
    uploaded: int
    uploaded_bytes: int


def _parallel(store: ContentStore, work: Callable[[T], R], items: Iterable[T]) -> list[R]:
    with ThreadPoolExecutor(max_workers=store.threads) as pool:
        return list(pool.map(work, items))


async def pack(path: Path, store: ContentStore) -> tuple[ContentRef, PackReport]:
    """Upload what the store lacks of the folder or file at ``path``; its reference."""
    manifest = await scan(path)
    ref = ContentRef(store=store.url, manifest=manifest.digest())
    files = manifest.files
    if await asyncio.to_thread(store.has, manifest_key(ref.manifest)):
        return ref, PackReport(files=len(files), uploaded=0, uploaded_bytes=0)
    blobs = {entry.sha256: entry for entry in files if entry.sha256 is not None}
    base = path if manifest.root == "dir" else path.parent

    def upload_missing() -> list[int]:
        present = _parallel(store, lambda digest: store.has(blob_key(digest)), list(blobs))
        missing = [entry for entry, have in zip(blobs.values(), present, strict=True) if not have]

        def put(entry: Entry) -> int:
            assert entry.sha256 is not None
            store.put_file(blob_key(entry.sha256), base / entry.path)
            return entry.size

        sizes = _parallel(store, put, missing)
        store.put_bytes(manifest_key(ref.manifest), manifest.canonical())
        return sizes

    sizes = await asyncio.to_thread(upload_missing)
    return ref, PackReport(files=len(files), uploaded=len(sizes), uploaded_bytes=sum(sizes))


def fetched_path(cache: Path, ref: ContentRef, manifest: Manifest) -> Path:
    """Where a fetched tree's root is: the folder, or the lone file."""
    tree = cache / ref.manifest / "tree"
    return tree if manifest.root == "dir" else tree / manifest.entries[0].path


def fetch(ref: ContentRef, cache: Path, via: StoreConfig | None = None) -> Path:
    """The tree of ``ref`` on this machine (fetched once; blocking): its folder or lone file.

    ``via`` is this machine's endpoint and credentials for the store ``ref`` names (default none).
    """
    cache.mkdir(parents=True, exist_ok=True)
    final = cache / ref.manifest
    with (cache / f"{ref.manifest}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released by the kernel if this process dies
        done = final / "manifest.json"
        if done.is_file():
            return fetched_path(cache, ref, Manifest.model_validate_json(done.read_bytes()))
        store = (via or StoreConfig(ref.store)).reach(ref.store)
        data = store.get_bytes(manifest_key(ref.manifest))
        manifest = Manifest.model_validate_json(data)
        partial = cache / f"{ref.manifest}.partial"
        shutil.rmtree(partial, ignore_errors=True)  # a killed fetch's leftovers
        _build(store, manifest, partial / "tree")
        (partial / "manifest.json").write_bytes(data)
        os.replace(partial, final)
    return fetched_path(cache, ref, manifest)


def _build(store: ContentStore, manifest: Manifest, tree: Path) -> None:
    """Write every entry under ``tree``: folders, then files (each blob fetched once), links, mtimes."""
    tree.mkdir(parents=True)
    folders = [entry for entry in manifest.entries if entry.kind == "dir"]
    for entry in folders:
        (tree / entry.path).mkdir(parents=True, exist_ok=True)
    first: dict[str, Entry] = {}
    copies: list[Entry] = []
    for entry in manifest.files:
        assert entry.sha256 is not None
        (tree / entry.path).parent.mkdir(parents=True, exist_ok=True)
        if entry.sha256 in first:
            copies.append(entry)
        else:
            first[entry.sha256] = entry

    def get(entry: Entry) -> None:
        assert entry.sha256 is not None
        store.get_file(blob_key(entry.sha256), tree / entry.path)

    _parallel(store, get, first.values())
    for entry in copies:
        assert entry.sha256 is not None
        shutil.copyfile(tree / first[entry.sha256].path, tree / entry.path)
    for entry in manifest.entries:
        path = tree / entry.path
        if entry.kind == "link":
            assert entry.target is not None
            path.symlink_to(entry.target)
            os.utime(path, ns=(entry.mtime_ns, entry.mtime_ns), follow_symlinks=False)
        elif entry.kind == "file":
            os.chmod(path, entry.mode)
            os.utime(path, ns=(entry.mtime_ns, entry.mtime_ns))
    for entry in sorted(folders, key=lambda entry: entry.path.count("/"), reverse=True):
        os.chmod(tree / entry.path, entry.mode)
        os.utime(tree / entry.path, ns=(entry.mtime_ns, entry.mtime_ns))
