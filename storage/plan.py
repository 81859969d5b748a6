"""What a task's ``file_mounts`` ask of buckets and nodes: one ``MountPlan`` per bucket or URL entry.

Pure: ``launch --dryrun`` shows the same plan that the launch carries out.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from skyhop.contract.clusters import ClusterStorage
from skyhop.spec.storage import BucketRef, Storage, StorageMode, bucket_url_of

__all__ = ["MountPlan", "cluster_storage", "local_file_mounts", "storage_plan"]


class MountPlan(BaseModel):
    """One storage entry of a task, resolved: where it lands, from which bucket (or URL), and how."""

    model_config = ConfigDict(frozen=True)

    target: str
    """The path on each node, as the task wrote it (``~/data``, ``data``, ``/data``)."""
    mode: StorageMode
    bucket: BucketRef | None = None
    """None for an ``https://`` file."""
    url: str | None = None
    """The ``https://`` file downloaded to ``target``."""
    create: bool = False
    """A named bucket (``name:``): created when missing, and skyhop's if it created it."""
    upload: list[str] = []
    """Local paths uploaded into the bucket before the nodes see it."""
    upload_by_name: bool = False
    """A list source (SkyPilot's rule): each path lands in the bucket under its own name. A single
    folder's contents land at the bucket's root."""
    persistent: bool = True

    def describe(self) -> str:
        """One line for the printed plan: ``s3://b (MOUNT; created if missing, deleted on down)``."""
        source = self.url if self.bucket is None else self.bucket.url
        notes = [self.mode.value]
        if self.upload:
            notes.append(f"{len(self.upload)} local path{'s' if len(self.upload) > 1 else ''} uploaded")
        if self.create:
            notes.append("created if missing" + ("" if self.persistent else ", deleted on down if created"))
        return f"{source} ({'; '.join(notes)})"


def storage_plan(file_mounts: dict[str, str | Storage]) -> list[MountPlan]:
    """The bucket and URL entries of ``file_mounts`` (local paths are synced as before)."""
    plans = []
    for target, entry in file_mounts.items():
        if isinstance(entry, Storage):
            plans.append(
                MountPlan(
                    target=target,
                    mode=entry.mode,
                    bucket=entry.bucket_ref(),
                    create=entry.name is not None,
                    upload=entry.local_sources,
                    upload_by_name=isinstance(entry.source, list),
                    persistent=entry.persistent,
                )
            )
        elif (ref := bucket_url_of(entry)) is not None:
            plans.append(MountPlan(target=target, mode=StorageMode.COPY, bucket=ref))
        elif entry.startswith("https://"):
            plans.append(MountPlan(target=target, mode=StorageMode.COPY, url=entry))
    return plans


def local_file_mounts(file_mounts: dict[str, str | Storage]) -> dict[str, str]:
    """The entries that are local paths, copied from this machine to every node."""
    return {
        target: entry
        for target, entry in file_mounts.items()
        if isinstance(entry, str) and "://" not in entry
    }


def cluster_storage(plans: list[MountPlan]) -> ClusterStorage:
    """What a launch of ``plans`` leaves on its cluster: the buckets it may create, and its mounts."""
    return ClusterStorage(
        buckets=[plan.bucket for plan in plans if plan.create and plan.bucket is not None],
        mounted=any(plan.mode.mounts for plan in plans),
        cached=any(plan.mode is StorageMode.MOUNT_CACHED for plan in plans),
    )
