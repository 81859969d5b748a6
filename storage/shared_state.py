"""State one machine decides and every worker reads: named files in the content store, mirrored locally.

``skyhop check``'s verdicts and the catalogs ``skyhop catalog update`` fetched are decided where
the CLI runs and used by the optimizer on whichever worker picks the task. Each is a file under
``state/`` in the content store (``publish``). A reader keeps a local copy at the path the file
had before state was shared (``~/.skyhop/enabled_providers.json``, ``~/.skyhop/catalogs/...``)
and refreshes it only when the store's copy changed (``mirrored``): a stat on a folder store; on a
bucket, one conditional GET at most every ``ContentStore.revalidate_s``, so an optimize does not
download anything that did not change. When the store has no copy, the local file (if any) is used
as it is; when the store cannot be reached, the last copy is, and the failure is logged.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

from skyhop.storage.content import ContentStore, StoreConfig, load_store_config
from skyhop.storage.errors import ContentNotFoundError, StorageError

__all__ = ["mirrored", "publish", "state_key"]

log = logging.getLogger("skyhop.storage")

_lock = threading.Lock()
_stores: dict[StoreConfig, ContentStore] = {}
_seen: dict[tuple[str, str], tuple[str | None, float]] = {}
"""(store URL, name) -> (the store copy's version tag last mirrored, when it was last asked)."""


def state_key(name: str) -> str:
    return f"state/{name}"


def publish(name: str, data: bytes, local: Path) -> None:
    """Make ``data`` the deployment's ``name``, and this machine's copy at ``local``."""
    _replace(local, data)
    store = _open(load_store_config())
    store.put_bytes(state_key(name), data)
    with _lock:
        _seen.pop((store.url, name), None)


def mirrored(name: str, local: Path) -> Path | None:
    """``local``, brought up to date with the store's ``name`` if that changed; None when neither has it."""
    config = load_store_config()
    memo = (config.url, name)
    with _lock:
        seen = _seen.get(memo)
    have = local.is_file()
    now = time.monotonic()
    try:
        store = _open(config)
        if have and seen is not None and now - seen[1] < store.revalidate_s:
            return local
        tag, data = store.get_if_changed(state_key(name), seen[0] if have and seen else None)
    except ContentNotFoundError:
        tag = None  # never shared: this machine's file, as it is
    except StorageError as exc:
        log.warning("%s; using this machine's copy of %s", exc, name)
        tag = seen[0] if seen else None
    else:
        if data is not None:
            _replace(local, data)
            have = True
    with _lock:
        _seen[memo] = (tag, now)
    return local if have else None


def _open(config: StoreConfig) -> ContentStore:
    """One store object per configuration: a bucket's client is costly to make for every read."""
    with _lock:
        store = _stores.get(config)
    if store is None:
        store = config.open()
        with _lock:
            _stores[config] = store
    return store


def _replace(path: Path, data: bytes) -> None:
    """Write ``path`` whole (a temporary file, then a rename): readers never see half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
