"""What a cluster remembers of its launches' storage (``ClusterStorage``), the pure part of
``down`` deleting every launch's buckets and of every job flushing cached mounts."""

from __future__ import annotations

from skyhop.contract.clusters import ClusterInput, ClusterRecord, ClusterStorage
from skyhop.spec import Task
from skyhop.spec.storage import BucketRef, Storage, StorageMode, StoreKind
from skyhop.storage.plan import cluster_storage, storage_plan


def _ref(name: str) -> BucketRef:
    return BucketRef(store=StoreKind.S3, bucket=name)


def test_launches_add_up_and_a_bucket_is_kept_once() -> None:
    first = cluster_storage(
        storage_plan(
            {
                "~/d": Storage(mode=StorageMode.COPY, source="s3://elsewhere/x"),
                "~/u": "s3://users-own/file",  # used, never created: not skyhop's to delete
            }
        )
    )
    assert first == ClusterStorage(buckets=[], mounted=False, cached=False)
    second = cluster_storage(storage_plan({"~/c": Storage(name="bkt-b", mode=StorageMode.MOUNT_CACHED)}))
    third = cluster_storage(storage_plan({"~/m": Storage(name="bkt-b"), "~/n": Storage(name="bkt-c")}))
    total = first.merged(second).merged(third)
    assert total == ClusterStorage(buckets=[_ref("bkt-b"), _ref("bkt-c")], mounted=True, cached=True)
    assert total.merged(second) == total


def test_a_cluster_input_from_before_storage_was_kept_reads_as_unset() -> None:
    """The cluster workflow then falls back to its last launch's task (``setup_task``)."""
    task = Task(run="true", file_mounts={"~/c": Storage(name="bkt-b", mode=StorageMode.MOUNT_CACHED)})
    old = ClusterInput.model_validate_json(
        ClusterInput(record=ClusterRecord(name="bkt-c"), setup_task=task).model_dump_json(exclude={"storage"})
    )
    assert "storage" not in old.model_fields_set
    assert "storage" in ClusterInput.model_validate_json(old.model_dump_json()).model_fields_set
