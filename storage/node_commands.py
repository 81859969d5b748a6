"""The rclone commands a node runs for its storage: copy, mount, flush, unmount.

Each is a bash script built from quoted values (no value is ever spliced unquoted) and run as a
node job, so it survives a worker restart and a retry re-attaches to it. The store's rclone options
arrive in the job's environment (``rclone_env``), never in the script. What a node has mounted is
listed in ``~/.skyhop-storage/mounts``, so unmounting needs nothing but the node.

- ``COPY``: ``rclone copy`` with several transfers and several streams per large file.
- ``MOUNT``: ``rclone mount`` with a write cache that uploads a file as soon as it is closed.
- ``MOUNT_CACHED``: a full read/write-back cache, uploads one at a time in the order files were
  closed (``--transfers 1``); its remote-control port lets ``flush_script`` wait until nothing is
  left to upload, which the job's script does before the job is reported done.
"""

from __future__ import annotations

import hashlib
import shlex

from skyhop.spec.storage import StorageMode, StoreKind
from skyhop.storage.plan import MountPlan

__all__ = [
    "COPY_STREAMS",
    "attach_script",
    "detach_script",
    "flush_script",
    "remote_name",
    "rclone_env",
    "with_flush",
]

COPY_STREAMS = 8
"""Parallel transfers, and streams per large file, of a COPY (``benchmarks/storage_copy.py``)."""
_COPY_FLAGS = (
    f"--transfers {COPY_STREAMS} --checkers {COPY_STREAMS} "
    f"--multi-thread-streams {COPY_STREAMS} --multi-thread-cutoff 32M"
)
_MOUNT_FLAGS = {
    StorageMode.MOUNT: "--vfs-cache-mode writes --vfs-write-back 0s --dir-cache-time 5s",
    StorageMode.MOUNT_CACHED: "--vfs-cache-mode full --vfs-write-back 1s --transfers 1 --dir-cache-time 5s",
}

_RCLONE = 'rclone "${ca[@]}"'
"""rclone with the CA bundle the prelude found (an empty array expands to nothing)."""

_PRELUDE = r"""set -eu
state="$HOME/.skyhop-storage"
mkdir -p "$state"
export RCLONE_CONFIG="$state/rclone.conf"
touch "$RCLONE_CONFIG"
# rclone 1.60 cannot load AWS_CA_BUNDLE itself ("unsupported transport"); its --ca-cert can.
ca=()
if [ -n "${AWS_CA_BUNDLE:-}" ]; then
    ca=(--ca-cert "$AWS_CA_BUNDLE")
    unset AWS_CA_BUNDLE
fi
"""

_FLUSH = r"""
for rc in "$state"/*.rc; do
    [ -e "$rc" ] || continue
    port=$(cat "$rc")
    while :; do
        stats=$(rclone "${ca[@]}" rc --url "http://127.0.0.1:$port/" vfs/stats 2>&1) || {
            echo "skyhop: the cached mount with control port $port is gone: $stats" >&2; exit 1; }
        case "$(printf %s "$stats" | tr -d ' \n\t')" in
            *'"uploadsInProgress":0,"uploadsQueued":0'*) break ;;
        esac
        sleep 0.2
    done
done
"""


def remote_name(kind: StoreKind) -> str:
    """The rclone remote of a store (letters only: rclone maps it to ``RCLONE_CONFIG_<NAME>_*``)."""
    return f"skyhop{kind.value}"


def rclone_env(kind: StoreKind, config: dict[str, str]) -> dict[str, str]:
    """A store's rclone options as the environment variables that define its remote."""
    prefix = f"RCLONE_CONFIG_{remote_name(kind).upper()}_"
    return {prefix + key.upper(): value for key, value in config.items()}


def _node_path(target: str) -> str:
    """``target`` as a shell word: under ``$HOME`` unless absolute (``..`` was refused by the spec)."""
    if target.startswith("/"):
        return shlex.quote(target)
    relative = target[2:] if target.startswith("~/") else ("" if target == "~" else target)
    return '"$HOME"/' + shlex.quote(relative) if relative else '"$HOME"'


def _mount_id(target: str) -> str:
    return hashlib.sha256(target.encode()).hexdigest()[:16]


def _attach_one(plan: MountPlan) -> str:
    target = _node_path(plan.target)
    if plan.url is not None:
        return f'mkdir -p "$(dirname {target})"\n{_RCLONE} copyurl {shlex.quote(plan.url)} {target}\n'
    assert plan.bucket is not None
    path = f"{remote_name(plan.bucket.store)}:{plan.bucket.bucket}"
    source = shlex.quote(f"{path}/{plan.bucket.prefix}" if plan.bucket.prefix else path)
    if plan.mode is StorageMode.COPY:
        return (
            f"if {_RCLONE} lsjson --stat {source} 2>/dev/null | tr -d ' ' | grep -q '\"IsDir\":false'; then\n"
            f'    mkdir -p "$(dirname {target})"\n'
            f"    {_RCLONE} copyto {source} {target} {_COPY_FLAGS}\n"
            f"else\n"
            f"    mkdir -p {target}\n"
            f"    {_RCLONE} copy {source} {target} {_COPY_FLAGS}\n"
            f"fi\n"
        )
    mount_id = _mount_id(plan.target)
    log = f'"$state/{mount_id}.log"'
    control, rc_flags = "", ""
    if plan.mode is StorageMode.MOUNT_CACHED:
        control = (
            '    port=$(python3 -c \'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); '
            "print(s.getsockname()[1])')\n"
            f'    echo "$port" > "$state/{mount_id}.rc"\n'
        )
        rc_flags = ' --rc --rc-no-auth --rc-addr "127.0.0.1:$port"'
    return (
        f"mkdir -p {target}\n"
        f"if ! mountpoint -q {target}; then\n"
        f"{control}"
        f"    setsid {_RCLONE} mount {source} {target} {_MOUNT_FLAGS[plan.mode]}{rc_flags} \\\n"
        f'        --cache-dir "$state/cache-{mount_id}" --log-file {log} </dev/null >>{log} 2>&1 &\n'
        f"    rclone_pid=$!\n"
        f"    waited=0\n"
        f"    until mountpoint -q {target}; do\n"
        f'        if ! kill -0 "$rclone_pid" 2>/dev/null || [ "$waited" -ge 600 ]; then\n'
        f"            echo skyhop: mounting {shlex.quote(plan.bucket.url)} failed: >&2\n"
        f"            tail -5 {log} >&2\n"
        f'            kill "$rclone_pid" 2>/dev/null || true\n'
        f"            exit 1\n"
        f"        fi\n"
        f"        sleep 0.05\n"
        f"        waited=$((waited + 1))\n"
        f"    done\n"
        f"fi\n"
        f'grep -qxF {target} "$state/mounts" 2>/dev/null || printf \'%s\\n\' {target} >> "$state/mounts"\n'
    )


def attach_script(plans: list[MountPlan]) -> str:
    """Copy, download or mount every entry of ``plans`` on this node (a repeat does nothing new)."""
    return _PRELUDE + "".join(_attach_one(plan) for plan in plans)


def flush_script() -> str:
    """Wait until every cached mount of the node has uploaded what was written to it."""
    return _PRELUDE + _FLUSH


def detach_script() -> str:
    """Flush the cached mounts, then unmount everything skyhop mounted on this node."""
    return (
        _PRELUDE
        + f"(\n{_FLUSH}\n) || echo skyhop: unmounting with uploads still pending >&2\n"
        + r"""
if [ -f "$state/mounts" ]; then
    while read -r target; do
        fusermount3 -uz "$target" 2>/dev/null || fusermount -uz "$target" 2>/dev/null \
            || umount -l "$target" 2>/dev/null || true
    done < "$state/mounts"
    rm -f "$state/mounts" "$state"/*.rc
fi
"""
    )


def with_flush(script: str) -> str:
    """The job's script, then the flush of the node's cached mounts; the job's exit code is kept."""
    return f"(\n{script}\n)\nskyhop_code=$?\n(\n{flush_script()}\n) || exit 1\nexit $skyhop_code\n"
