"""References to the bytes a client packed into the content store (Temporal's claim-check pattern).

The CLI uploads the workdir, local file mounts and storage entries' local sources,
content-addressed, into the deployment's content store (``storage.claim_check``) and sends the
task with these references; workers fetch the trees from the store instead of reading the
client's paths, which they need not share.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from skyhop.spec.limits import MAX_FILE_MOUNTS, MAX_PATH_CHARS

__all__ = ["ContentRef", "PackedFiles"]

SHA256_PATTERN = r"^[0-9a-f]{64}$"


class ContentRef(BaseModel):
    """One packed tree: the store it is in and the SHA-256 of its manifest (which names every blob)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    store: str = Field(min_length=1, max_length=MAX_PATH_CHARS)
    """``file:///abs/folder`` or ``s3://bucket[/prefix]``; a worker reaches it with its own credentials."""
    manifest: str = Field(pattern=SHA256_PATTERN)


class PackedFiles(BaseModel):
    """What a task's local paths became in the content store; a worker reads these, never the paths."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    workdir: ContentRef | None = None
    file_mounts: dict[str, ContentRef] = Field(default={}, max_length=MAX_FILE_MOUNTS)
    """Remote path -> the packed local file or folder of that file mount."""
    sources: dict[str, ContentRef] = Field(default={}, max_length=MAX_FILE_MOUNTS)
    """A storage entry's local ``source`` path (as the task names it) -> the packed file or folder
    the worker uploads into the bucket in its place."""
