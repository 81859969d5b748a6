"""Activities that copy the user's files to nodes (long task queue).

A task packed by its client (``Task.packed``) is fetched from the content store into this
machine's per-manifest cache first (``storage.claim_check.fetch``; a retry re-uses it) and synced
from there: the worker never needs the client's paths. A task that names paths only (a client on
the worker's own machine that did not pack) is synced from those paths.

Copies heartbeat while they run (a 200 MB workdir takes longer than a heartbeat timeout), are
killed when the activity is cancelled, and retry a node that does not answer until it has been
silent for ``NODE_LOST_AFTER_S``; then the sync fails, naming the node, and is not retried.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError

from skyhop.activities.models import FileMountsInput, SyncWorkdirInput
from skyhop.activities.node_jobs import WORKDIR, is_lost, node_lost
from skyhop.contract import ErrorType
from skyhop.providers.base import ClusterHandle, NodeHandle, NodeRuntime
from skyhop.providers.registry import get_provider
from skyhop.providers.runtime.errors import NodeUnreachableError
from skyhop.spec.packed import ContentRef
from skyhop.spec.task import GitWorkdir, Task
from skyhop.storage.claim_check import fetch
from skyhop.storage.content import content_cache, load_store_config
from skyhop.storage.errors import RETRY_CANNOT_FIX, StorageError

__all__ = [
    "fetched",
    "heartbeating",
    "sync_file_mounts",
    "sync_git_workdir_to",
    "sync_task_workdir",
    "sync_workdir",
    "sync_workdir_to",
]

T = TypeVar("T")
_BEAT_S = 2.0
_RETRY_S = 1.0


@activity.defn
async def sync_workdir(request: SyncWorkdirInput) -> None:
    """Copy the task's workdir to every node."""
    await _sync_any_workdir(request.handle, request.workdir, request.git, request.packed)


async def sync_workdir_to(handle: ClusterHandle, workdir: str) -> None:
    """Make ``WORKDIR`` on every node mirror ``workdir`` (ignore rules applied)."""
    await heartbeating(_on_every_node(handle, lambda rt: rt.sync_dir(workdir, WORKDIR)))


async def sync_task_workdir(handle: ClusterHandle, task: Task) -> None:
    """The task's workdir, packed, a local folder or a git repository, onto every node (``exec``)."""
    packed = task.packed.workdir if task.packed is not None else None
    await _sync_any_workdir(handle, task.workdir or "", task.workdir_git, packed)


async def _sync_any_workdir(
    handle: ClusterHandle, workdir: str, git: GitWorkdir | None, packed: ContentRef | None
) -> None:
    if git is not None:
        await sync_git_workdir_to(handle, git)
    elif packed is not None:
        await sync_workdir_to(handle, await fetched(packed))
    elif workdir:
        await sync_workdir_to(handle, workdir)


async def fetched(ref: ContentRef) -> str:
    """The packed tree on this machine (fetched into the cache unless it is there): its path.

    What retrying cannot fix (the tree is not in the store, no credentials) fails the activity
    for good; a store that does not answer is retried.
    """
    try:
        via = load_store_config()
        return str(await heartbeating(asyncio.to_thread(fetch, ref, content_cache(), via)))
    except StorageError as exc:
        if type(exc).__name__ in RETRY_CANNOT_FIX:
            raise ApplicationError(str(exc), type=ErrorType.STORAGE_FAILED, non_retryable=True) from None
        raise


async def sync_git_workdir_to(handle: ClusterHandle, git: GitWorkdir) -> None:
    """Check ``git`` out at its ref here, then sync that tree as the workdir.

    Cloning where the worker runs uses the worker's git credentials and needs no git on the nodes;
    every node gets the same commit, with its ``.git`` history, as SkyPilot's clone gives.
    """
    with tempfile.TemporaryDirectory(prefix="skyhop-git-") as scratch:
        tree = Path(scratch) / "repo"
        await heartbeating(_git("clone", "--quiet", "--no-checkout", git.url, str(tree)))
        await heartbeating(_git("-C", str(tree), "checkout", "--quiet", git.ref or "HEAD"))
        await sync_workdir_to(handle, str(tree))


async def _git(*args: str) -> None:
    process = await asyncio.create_subprocess_exec(
        "git", *args, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
    )
    try:
        _, err = await process.communicate()
    except asyncio.CancelledError:
        process.kill()
        raise
    if process.returncode != 0:
        last = (err.decode(errors="replace").strip().splitlines() or ["no output"])[-1]
        raise ApplicationError(
            f"workdir: git {args[-2] if args[0] == 'clone' else 'checkout ' + args[-1]}: {last}",
            type=ErrorType.GIT_WORKDIR_FAILED,
            non_retryable=True,
        )


@activity.defn
async def sync_file_mounts(request: FileMountsInput) -> None:
    """Copy each local file mount to its remote path on every node."""
    for remote, local in request.file_mounts.items():
        packed = request.packed.get(remote)
        source = await fetched(packed) if packed is not None else local
        await heartbeating(_on_every_node(request.handle, _put(source, remote)))


def _put(local: str, remote: str) -> Callable[[NodeRuntime], Awaitable[None]]:
    return lambda runtime: runtime.put_path(local, remote)


async def heartbeating(work: Awaitable[T]) -> T:
    """Await ``work`` while heartbeating; cancelling the activity cancels the work (rsync is killed)."""
    task = asyncio.ensure_future(work)
    try:
        while True:
            activity.heartbeat()
            done, _ = await asyncio.wait([task], timeout=_BEAT_S)
            if done:
                return task.result()
    except asyncio.CancelledError:
        task.cancel()
        raise


async def _on_every_node(handle: ClusterHandle, copy: Callable[[NodeRuntime], Awaitable[None]]) -> None:
    provider = get_provider(handle.offering.provider)
    await asyncio.gather(*(_copy_to(handle, node, provider.runtime(node), copy) for node in handle.nodes))


async def _copy_to(
    handle: ClusterHandle,
    node: NodeHandle,
    runtime: NodeRuntime,
    copy: Callable[[NodeRuntime], Awaitable[None]],
) -> None:
    silent_since = time.monotonic()
    while True:
        try:
            await copy(runtime)
            return
        except NodeUnreachableError as exc:
            if is_lost(exc, silent_since):
                raise node_lost(handle, node.rank, exc) from None
        await asyncio.sleep(_RETRY_S)
