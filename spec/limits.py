"""Every bound on what a user can ask for, in one place, each with the reason it is that size.

They are checked before anything starts (the CLI refuses, exit 2) and again by the models a
worker validates, so a request from any Temporal client meets the same bounds. A bound is there
because something downstream breaks past it: Temporal's payload limits, the kernel's limits on
one process's arguments and environment, or this machine's capacity for ``local`` nodes.
"""

from __future__ import annotations

from pydantic import BaseModel

from skyhop.spec.errors import SpecError

__all__ = [
    "MAX_ALTERNATIVES",
    "MAX_CHAIN_TASKS",
    "MAX_ENVS",
    "MAX_ENVS_BYTES",
    "MAX_FILE_MOUNTS",
    "MAX_FOLDER_NODES",
    "MAX_IMAGE_CHARS",
    "MAX_LABELS",
    "MAX_LABEL_CHARS",
    "MAX_NAME_CHARS",
    "MAX_NUM_NODES",
    "MAX_POOL_WORKERS",
    "MAX_PATH_CHARS",
    "MAX_REQUEST_BYTES",
    "MAX_SCRIPT_BYTES",
    "MAX_TASK_FILE_BYTES",
    "MAX_TERMINATION_DELAY_SECONDS",
    "MAX_YAML_DEPTH",
    "MAX_YAML_VALUES",
    "check_request_size",
]

MAX_NUM_NODES = 1000
"""Nodes of one cluster, anywhere. The cluster's handle (about 250 bytes a node) rides in every
provision result, cluster record and job; a thousand nodes keep those far below Temporal's 2 MB
payload limit, which a 20,000-node request broke (the provision step then retried forever)."""

MAX_FOLDER_NODES = 64
"""Nodes of a cluster whose nodes are folders on this machine (``local``, ``sim``): every node
runs its copy of the job here, so more nodes than this only oversubscribe one machine."""

MAX_POOL_WORKERS = 256
"""Workers of one pool. Each is a cluster the pool's workflow keeps, with its handle in the pool's
state (every query and continue-as-new carries them all); SkyPilot's pools run tens."""

MAX_ENVS = 512
"""Variables in ``envs``; SkyPilot tasks use a handful."""

MAX_ENVS_BYTES = 128 * 1024
"""Total size of ``envs`` (names and values). The kernel refuses to start a process whose
arguments and environment exceed ARG_MAX (often 2 MB, shared with the worker's own environment)
and any single ``NAME=value`` over 128 KiB (MAX_ARG_STRLEN)."""

MAX_SCRIPT_BYTES = 64 * 1024
"""Size of ``setup`` and of ``run`` each. A script is one ``bash -c`` argument, which the kernel
refuses over 128 KiB (MAX_ARG_STRLEN); a longer one belongs in a file in the workdir."""

MAX_FILE_MOUNTS = 256
"""Entries in ``file_mounts``: each is copied to every node in turn."""

MAX_NAME_CHARS = 256
"""Length of a task name: shown in tables and carried in every job record."""

MAX_PATH_CHARS = 4096
"""Length of a path in ``workdir`` or ``file_mounts`` (Linux's PATH_MAX)."""

MAX_LABELS = 50
"""``resources.labels``: AWS allows 50 tags per instance (skyhop adds its own 3 beside them)."""
MAX_LABEL_CHARS = 63
"""A label's key and value: GCP's limit, the strictest of the clouds."""
MAX_IMAGE_CHARS = 512
"""A container image reference (``image_id: docker:IMAGE``): it reaches the node's ``docker run``
command line; registries allow about 255 characters for the name, plus tag or digest."""

MAX_ALTERNATIVES = 64
"""Complete requests in ``any_of``/``ordered`` (after accelerator sets are expanded): each is
optimized separately, and ``any_of`` times an accelerator set multiplies."""

MAX_CHAIN_TASKS = 32
"""Tasks in one ``---`` chain, placed jointly by one solver call."""

MAX_TERMINATION_DELAY_SECONDS = 24 * 3600
"""A job group's ``termination_delay``: auxiliary tasks hold their clusters (and cost) that long
after the primary tasks ended; a day covers any flush, a longer wait is a typo (``30h`` for ``30m``)."""

MAX_REQUEST_BYTES = 512 * 1024
"""A launch request or job submission, as JSON. Temporal refuses a payload over 2 MB, and the
task is copied into several (the launch's input, the cluster's record, each job); 512 KiB is
where Temporal starts warning."""

MAX_TASK_FILE_BYTES = 1024 * 1024
"""A task YAML file, refused before it is parsed: larger than any request it could produce
(``MAX_REQUEST_BYTES``) with room for comments, and small enough to parse in well under a second."""

MAX_YAML_VALUES = 20_000
"""Values in a task file once its aliases are expanded: bounds "billion laughs" anchors, which
otherwise expand to hundreds of millions of values and hang whatever walks them."""

MAX_YAML_DEPTH = 32
"""Nesting of a task file; real tasks nest about five deep, and deep nesting exhausts recursion."""


def check_request_size(request: BaseModel, what: str) -> None:
    """Refuse ``request`` when its JSON exceeds ``MAX_REQUEST_BYTES`` (what Temporal would carry)."""
    size = len(request.model_dump_json().encode())
    if size > MAX_REQUEST_BYTES:
        raise SpecError(
            "",
            f"the {what} is {size // 1024} KiB as JSON, over the {MAX_REQUEST_BYTES // 1024} KiB limit; "
            "move large scripts and values into files (workdir or file_mounts)",
        )
