"""The node jobs that copy, mount, flush and unmount a node's buckets (``runtime/node_storage.py``).

The work is done on the node by ``providers.runtime.node_storage``, installed beside the node
runner; here is only what the controller hands it: a fixed command line, the entries as JSON in
the job's environment, and the store's rclone options as environment variables
(``rclone_env``), never in the script, so no value is ever spliced into shell text and
credentials never reach Temporal's history or the node's disk.
"""

from __future__ import annotations

import json
import posixpath

from skyhop.providers.base import NodeHandle
from skyhop.providers.runtime import node_storage
from skyhop.spec.storage import StoreKind
from skyhop.storage.plan import MountPlan

__all__ = [
    "ATTACH_SCRIPT",
    "DETACH_SCRIPT",
    "attach_entries",
    "attach_env",
    "remote_name",
    "rclone_env",
    "tool_env",
    "with_flush",
]

TOOL = posixpath.basename(node_storage.__file__)
"""The tool's file name in every node's runtime folder."""
_TOOL_VAR = "SKYHOP_STORAGE_TOOL"
_ENTRIES_VAR = "SKYHOP_STORAGE_ENTRIES"
_RUN_TOOL = f'python3 -I -S "${_TOOL_VAR}"'
ATTACH_SCRIPT = f'exec {_RUN_TOOL} attach "${_ENTRIES_VAR}"'
"""Copy, download or mount the entries of ``attach_env`` on the node (a repeat does nothing new)."""
DETACH_SCRIPT = f"exec {_RUN_TOOL} detach"
"""Flush the node's cached mounts, then unmount everything skyhop mounted on it."""
_FLUSH_AFTER = f"\n)\nskyhop_code=$?\n{_RUN_TOOL} flush || exit 1\nexit $skyhop_code\n"


def remote_name(kind: StoreKind) -> str:
    """The rclone remote of a store (letters only: rclone maps it to ``RCLONE_CONFIG_<NAME>_*``)."""
    return f"skyhop{kind.value}"


def rclone_env(kind: StoreKind, config: dict[str, str]) -> dict[str, str]:
    """A store's rclone options as the environment variables that define its remote."""
    prefix = f"RCLONE_CONFIG_{remote_name(kind).upper()}_"
    return {prefix + key.upper(): value for key, value in config.items()}


def tool_env(node: NodeHandle) -> dict[str, str]:
    """Where a job on ``node`` finds the storage tool (every storage job and flushing run needs it)."""
    return {_TOOL_VAR: posixpath.join(node.runtime_dir, TOOL)}


def attach_env(node: NodeHandle, plans: list[MountPlan]) -> dict[str, str]:
    """``ATTACH_SCRIPT``'s environment on ``node`` for ``plans`` (the store's options are added)."""
    return {**tool_env(node), _ENTRIES_VAR: json.dumps(attach_entries(plans))}


def attach_entries(plans: list[MountPlan]) -> list[dict[str, str]]:
    """The tool's ``attach`` entries: each plan's target and mode, with the rclone path of its
    bucket or its URL."""
    return [_entry(plan) for plan in plans]


def _entry(plan: MountPlan) -> dict[str, str]:
    if plan.bucket is None:
        assert plan.url is not None
        return {"target": plan.target, "mode": plan.mode.value, "url": plan.url}
    path = f"{remote_name(plan.bucket.store)}:{plan.bucket.bucket}"
    source = f"{path}/{plan.bucket.prefix}" if plan.bucket.prefix else path
    return {"target": plan.target, "mode": plan.mode.value, "source": source, "label": plan.bucket.url}


def with_flush(script: str) -> str:
    """The job's script, then the flush of the node's cached mounts; the job's exit code is kept.

    The job's environment needs ``tool_env``."""
    return f"(\n{script}{_FLUSH_AFTER}"
