"""Before a task is sent: its workdir, local file mounts and storage sources go into the content store.

Workers may run on other machines and never see this one's paths, so the bytes travel through
the configured store (``storage.content.StoreConfig``) and history carries only the references
(``Task.packed``). Only blobs the store lacks are uploaded: an unchanged tree costs its hashing
and one existence check.
"""

from __future__ import annotations

import time
from pathlib import Path

from skyhop.cli.output import EXIT_USAGE, fail, info
from skyhop.spec import Task
from skyhop.spec.packed import ContentRef, PackedFiles
from skyhop.spec.storage import Storage

__all__ = ["pack_task"]


async def pack_task(task: Task, *, file_mounts: bool = True) -> Task:
    """``task`` with ``packed`` set (``file_mounts=False``: the workdir only, as ``exec`` syncs)."""
    from skyhop.storage.claim_check import PackReport, pack
    from skyhop.storage.content import load_store_config
    from skyhop.storage.errors import StorageError
    from skyhop.storage.plan import local_file_mounts

    mounts = local_file_mounts(task.file_mounts) if file_mounts else {}
    entries = (
        [entry for entry in task.file_mounts.values() if isinstance(entry, Storage)] if file_mounts else []
    )
    sources = sorted({path for entry in entries for path in entry.local_sources})
    if not task.workdir and not mounts and not sources:
        return task
    started = time.monotonic()
    reports: list[PackReport] = []
    try:
        store = load_store_config().open()
    except StorageError as exc:
        fail(f"store.url: {exc}", EXIT_USAGE)
    try:

        async def packed(path: str) -> ContentRef:
            ref, report = await pack(Path(path), store)
            reports.append(report)
            return ref

        workdir = await packed(task.workdir) if task.workdir else None
        refs = {remote: await packed(local) for remote, local in mounts.items()}
        uploads = {source: await packed(source) for source in sources}
    except (StorageError, OSError) as exc:
        fail(f"uploading the task's files failed: {exc}")
    files = sum(report.files for report in reports)
    new = sum(report.uploaded for report in reports)
    size = sum(report.uploaded_bytes for report in reports)
    info(
        f"  ✓ Uploaded task files to {store.url}: {files} files, {new} new ({size / 1e6:.1f} MB)"
        f" ({time.monotonic() - started:.1f}s)"
    )
    return task.model_copy(update={"packed": PackedFiles(workdir=workdir, file_mounts=refs, sources=uploads)})
