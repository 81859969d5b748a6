"""The storage dict's rules are SkyPilot's: each wrong combination is refused with what to write instead."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from skyhop.spec.storage import BucketRef, Storage, StorageMode, StoreKind, bucket_url_of


def test_defaults_are_skypilots() -> None:
    storage = Storage(name="my-bucket", source="/data")
    assert storage.mode is StorageMode.MOUNT
    assert storage.persistent is True
    assert storage.bucket_ref() == BucketRef(store=StoreKind.S3, bucket="my-bucket")
    assert storage.local_sources == ["/data"]


def test_a_bucket_url_source_names_the_bucket() -> None:
    storage = Storage.model_validate({"source": "gs://shared-data/imagenet", "mode": "copy"})
    assert storage.bucket_ref() == BucketRef(store=StoreKind.GCS, bucket="shared-data", prefix="imagenet")
    assert storage.local_sources == []
    assert bucket_url_of("https://example.com/x") is None


@pytest.mark.parametrize("mode", ["MOUNT", "MOUNT_CACHED", "COPY"])
def test_a_bucket_url_below_the_bucket_is_that_folder_in_every_mode(mode: str) -> None:
    """SkyPilot's bucket sub-path: the node sees only the folder, however it reaches the node."""
    from skyhop.storage.node_commands import attach_entries
    from skyhop.storage.plan import storage_plan

    storage = Storage.model_validate({"source": "s3://shared/imagenet/train", "mode": mode})
    (entry,) = attach_entries(storage_plan({"/data": storage}))
    assert entry["source"].endswith(":shared/imagenet/train") and entry["mode"] == mode


def test_an_empty_name_is_no_name_as_in_skypilot() -> None:
    storage = Storage.model_validate({"name": "", "source": "gs://shared-data"})
    assert storage.name is None and storage.bucket_ref() == BucketRef(
        store=StoreKind.GCS, bucket="shared-data"
    )


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ({"source": "/data"}, "give the bucket's name"),
        ({"mode": "MOUNT"}, "give a name"),
        ({"name": "scratch", "mode": "COPY"}, "COPY needs a source"),
        ({"name": "b1x", "source": "s3://other"}, "drop name"),
        ({"name": "s3://b1x"}, "must not start with s3://"),
        ({"name": "", "source": "/data"}, "give the bucket's name"),
        ({"name": "", "mode": "MOUNT"}, "give a name"),
        ({"source": "hf://datasets/org/set", "mode": "COPY"}, "Hugging Face sources .* not supported yet"),
        ({"name": "bkt", "store": "hf"}, "Hugging Face sources .* not supported yet"),
        ({"source": "s3://bkt", "store": "gcs"}, "does not match"),
        ({"source": "ftp://host/x", "name": "bkt"}, "not supported"),
        ({"name": "Bad_Name", "source": "/data"}, "lowercase"),
        ({"name": "has.dot", "store": "azure"}, "lowercase letters, digits, hyphens,"),
        ({"name": "bkt", "mode": "FAST"}, "MOUNT"),
        ({"name": "bkt", "source": []}, "at least one"),
        ({"name": "bkt", "source": ["a/data", "b/data/"]}, "two paths named 'data'"),
        ({"name": "bkt", "store": "OCI"}, "store 'OCI' is not supported yet; skyhop keeps buckets on s3"),
        ({"name": "bkt", "store": "nebius"}, "not supported yet"),
    ],
)
def test_wrong_entries_say_what_to_do(entry: dict[str, object], says: str) -> None:
    with pytest.raises(ValidationError, match=says):
        Storage.model_validate(entry)
