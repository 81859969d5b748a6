"""Activities for a task's buckets: create and fill them (on the worker), copy or mount them on
nodes, unmount them, and delete the ones skyhop created for the cluster on ``down``.

Each is idempotent: a create finds the bucket it made, an upload overwrites, a node job keyed by
the activity re-attaches on a retry, an unmount of nothing and a delete of a missing bucket do
nothing. The stores' credentials are read here, on the worker, and reach the nodes only in the
environment of their node job (``storage.node_commands``), never in an activity's input.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError

from skyhop.activities.models import AttachInput, BucketsInput
from skyhop.activities.node_jobs import install_programs, run_on_nodes
from skyhop.activities.sync import fetched, heartbeating
from skyhop.contract import ErrorType
from skyhop.providers.base import ClusterHandle, NodeHandle
from skyhop.providers.registry import get_provider
from skyhop.providers.runtime.jobs import JobOutcome, JobSpec, NodeJobStatus
from skyhop.spec.storage import StoreKind
from skyhop.storage import (
    CLUSTER_LABEL,
    CREATED_LABEL,
    PERSISTENT_LABEL,
    BucketStore,
    StorageError,
    get_store,
    ownership_labels,
)
from skyhop.storage.node_commands import ATTACH_SCRIPT, DETACH_SCRIPT, attach_env, rclone_env, tool_env

__all__ = [
    "attach_storage",
    "delete_buckets",
    "detach_storage",
    "prepare_buckets",
]

T = TypeVar("T")
_LOG_TAIL = 600


@activity.defn
async def prepare_buckets(request: BucketsInput) -> None:
    """Create each named bucket that is missing (labelled as skyhop's) and upload its local sources."""
    for plan in request.mounts:
        if plan.bucket is None:
            continue
        ref, store = plan.bucket, await _store(plan.bucket.store)
        labels = ownership_labels(request.cluster_name, plan.persistent)
        if plan.create:
            await _storage_call(asyncio.to_thread(store.create, ref.bucket, None, labels))
        elif not await _storage_call(asyncio.to_thread(store.exists, ref.bucket)):
            raise _failed(f"file_mounts.{plan.target}: bucket {ref.url} does not exist")
        for source in plan.upload:
            # The client's path is on its machine: the worker uploads the tree it packed.
            packed = request.packed.get(source)
            data = Path(await fetched(packed)) if packed is not None else Path(source)
            prefix = ref.prefix
            if plan.upload_by_name and data.is_dir():
                prefix = "/".join(part for part in (ref.prefix, Path(source).name) if part)
            await _storage_call(heartbeating(asyncio.to_thread(store.upload, data, ref.bucket, prefix)))


@activity.defn
async def attach_storage(request: AttachInput) -> None:
    """Copy, download or mount every entry on every node, in parallel across nodes."""
    env: dict[str, str] = {}
    for kind in sorted({plan.bucket.store for plan in request.mounts if plan.bucket is not None}):
        store = await _store(kind)
        env.update(rclone_env(kind, await _storage_call(asyncio.to_thread(store.rclone_config))))
    outcome = await _run(
        request.handle, "attach", ATTACH_SCRIPT, lambda node: {**env, **attach_env(node, request.mounts)}
    )
    if outcome.status != NodeJobStatus.SUCCEEDED:
        raise _failed(f"storage could not be set up on node {outcome.failed_rank}: {outcome.error}")


@activity.defn
async def detach_storage(handle: ClusterHandle) -> None:
    """Flush and unmount what skyhop mounted on the nodes (before they stop or go away).

    A node that cannot be reached keeps its mounts: its machine is going away with them, and a
    folder node is unmounted by its provider before its folder is removed.
    """
    outcome = await _run(handle, "detach", DETACH_SCRIPT, tool_env)
    if outcome.status != NodeJobStatus.SUCCEEDED:
        activity.logger.warning("unmounting storage on %s: %s", handle.cluster_name, outcome.error)


@activity.defn
async def delete_buckets(request: BucketsInput) -> list[str]:
    """Delete the buckets this cluster's launches created and did not make persistent; their URLs.

    The bucket's own labels decide, not the task: a bucket skyhop did not create, or that a user
    made persistent, or that is already gone, is left alone (and never re-created).
    """
    # ``mounts``: what a cluster from before ``buckets`` asks to delete (its last launch's entries).
    legacy = [plan.bucket for plan in request.mounts if plan.create and plan.bucket is not None]
    wanted = {CREATED_LABEL: "true", PERSISTENT_LABEL: "false", CLUSTER_LABEL: request.cluster_name}
    deleted: list[str] = []
    for ref in dict.fromkeys([*request.buckets, *legacy]):
        store = await _store(ref.store)
        labels = await _storage_call(asyncio.to_thread(store.labels, ref.bucket))
        if labels is None or any(labels.get(key) != value for key, value in wanted.items()):
            continue
        if await _storage_call(heartbeating(asyncio.to_thread(store.delete, ref.bucket))):
            deleted.append(ref.url)
    return deleted


async def _store(kind: StoreKind) -> BucketStore:
    return await _storage_call(asyncio.to_thread(get_store, kind))


async def _storage_call(work: Awaitable[T]) -> T:
    """Await a store call; a ``StorageError`` becomes one non-retryable line for the user."""
    try:
        return await work
    except StorageError as exc:
        raise _failed(str(exc)) from None


def _failed(message: str) -> ApplicationError:
    return ApplicationError(message, type=ErrorType.STORAGE_FAILED, non_retryable=True)


async def _run(
    handle: ClusterHandle, purpose: str, script: str, env_of: Callable[[NodeHandle], dict[str, str]]
) -> JobOutcome:
    """Run ``script`` as a node job on every node, in the environment ``env_of`` gives each; its key
    is this activity's, so a retry re-attaches."""
    info = activity.info()
    digest = hashlib.sha256(f"{info.workflow_id}/{info.activity_id}".encode()).hexdigest()[:16]
    key = f"storage-{purpose}-{digest}"
    specs = [JobSpec(key=key, script=script, env=env_of(node)) for node in handle.nodes]
    await install_programs(handle)
    outcome = await heartbeating(run_on_nodes(handle, specs))
    if outcome.status != NodeJobStatus.SUCCEEDED and outcome.failed_rank is not None:
        runtime = get_provider(handle.offering.provider).runtime(handle.nodes[outcome.failed_rank])
        log = (await runtime.read_log(key, 0)).decode(errors="replace").strip()
        outcome = outcome.model_copy(update={"error": log[-_LOG_TAIL:] or outcome.error})
    return outcome
