"""skyhop's node-side storage tool: copy, mount, flush and unmount buckets with rclone.

Standard library only: like ``node_runner.py`` it is copied to every node's runtime folder as is,
and run as a node job (so a retry re-attaches to it). Its inputs are JSON and argv, never text
spliced into a shell script, so no bucket name, prefix or path can be misquoted. The store's
rclone options arrive in the environment (``RCLONE_CONFIG_<REMOTE>_<OPTION>``), never in argv.
What the node has mounted is listed in ``~/.skyhop-storage/mounts``, so unmounting needs nothing
but the node.

- ``COPY``: ``rclone copy`` with several transfers, and several streams per large file.
- ``MOUNT``: ``rclone mount`` with a write cache that uploads a file as soon as it is closed.
- ``MOUNT_CACHED``: a full read/write-back cache, uploading one file at a time in the order files
  were closed (``--transfers 1``); its remote-control port lets ``flush`` wait until nothing is
  left to upload, which a job does before it is reported done.

Usage (on a node)::

    python3 node_storage.py attach ENTRIES_JSON   # [{"target", "mode", "source"?, "url"?, "label"?}]
    python3 node_storage.py flush                 # wait for every cached mount's uploads
    python3 node_storage.py detach                # flush, then unmount everything mounted here

An entry's ``source`` is an rclone path (``remote:bucket/prefix``), ``url`` an ``https://`` file
downloaded to ``target``; ``label`` names the bucket in messages. ``copy_flags`` (a list) replaces
the COPY flags (``benchmarks/storage_copy.py`` compares with one stream).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from typing import Any

COPY_STREAMS = 8
"""Parallel transfers, and streams per large file, of a COPY (``benchmarks/storage_copy.py``)."""
COPY_FLAGS = [
    f"--transfers={COPY_STREAMS}",
    f"--checkers={COPY_STREAMS}",
    f"--multi-thread-streams={COPY_STREAMS}",
    "--multi-thread-cutoff=32M",
]
MOUNT_FLAGS = {
    "MOUNT": ["--vfs-cache-mode=writes", "--vfs-write-back=0s", "--dir-cache-time=5s"],
    "MOUNT_CACHED": ["--vfs-cache-mode=full", "--vfs-write-back=1s", "--transfers=1", "--dir-cache-time=5s"],
}
_MOUNT_WAIT_S = 30.0
_POLL_S = 0.05
_FLUSH_POLL_S = 0.2
_UNMOUNT = (["fusermount3", "-uz"], ["fusermount", "-uz"], ["umount", "-l"])


class StorageFailed(Exception):
    """One line for the job's log; the tool exits 1 with it."""


class Node:
    """This node's storage state (``~/.skyhop-storage``) and how rclone is run here."""

    def __init__(self) -> None:
        self.home = os.environ["HOME"]
        self.state = os.path.join(self.home, ".skyhop-storage")
        os.makedirs(self.state, exist_ok=True)
        self.env = dict(os.environ)
        self.env["RCLONE_CONFIG"] = os.path.join(self.state, "rclone.conf")
        open(self.env["RCLONE_CONFIG"], "a").close()
        # rclone 1.60 cannot load AWS_CA_BUNDLE itself ("unsupported transport"); its --ca-cert can.
        bundle = self.env.pop("AWS_CA_BUNDLE", "")
        self.rclone = ["rclone", "--ca-cert", bundle] if bundle else ["rclone"]

    def path(self, target: str) -> str:
        """``target`` on this node: under ``$HOME`` unless absolute (``..`` was refused by the spec)."""
        if target.startswith("/"):
            return target
        relative = target[2:] if target.startswith("~/") else ("" if target == "~" else target)
        return os.path.join(self.home, relative) if relative else self.home

    def run(self, *args: str) -> None:
        """Run rclone; its output goes to the job's log, a failure ends the tool."""
        done = subprocess.run([*self.rclone, *args], env=self.env, stdin=subprocess.DEVNULL, check=False)
        if done.returncode != 0:
            raise StorageFailed(f"skyhop: rclone {args[0]} failed with exit code {done.returncode}")

    def is_file(self, source: str) -> bool:
        """Whether ``source`` is one object (a COPY of it lands as a file), not a folder."""
        done = subprocess.run(
            [*self.rclone, "lsjson", "--stat", source], env=self.env, capture_output=True, check=False
        )
        try:
            return done.returncode == 0 and json.loads(done.stdout).get("IsDir") is False
        except ValueError:
            return False

    def mounts(self) -> list[str]:
        try:
            with open(os.path.join(self.state, "mounts")) as f:
                return [line.rstrip("\n") for line in f if line.strip()]
        except FileNotFoundError:
            return []

    def control_ports(self) -> list[int]:
        """The remote-control ports of this node's cached mounts."""
        ports = []
        for name in sorted(os.listdir(self.state)):
            if name.endswith(".rc"):
                with open(os.path.join(self.state, name)) as f:
                    ports.append(int(f.read().strip()))
        return ports


def attach(node: Node, entries: list[dict[str, Any]]) -> None:
    """Copy, download or mount every entry on this node (a repeat does nothing new)."""
    for entry in entries:
        target = node.path(entry["target"])
        if entry.get("url"):
            os.makedirs(os.path.dirname(target), exist_ok=True)
            node.run("copyurl", entry["url"], target)
        elif entry["mode"] == "COPY":
            flags = entry.get("copy_flags") or COPY_FLAGS
            if node.is_file(entry["source"]):
                os.makedirs(os.path.dirname(target), exist_ok=True)
                node.run("copyto", entry["source"], target, *flags)
            else:
                os.makedirs(target, exist_ok=True)
                node.run("copy", entry["source"], target, *flags)
        else:
            _mount(node, entry, target)


def _mount(node: Node, entry: dict[str, Any], target: str) -> None:
    os.makedirs(target, exist_ok=True)
    if not os.path.ismount(target):
        mount_id = hashlib.sha256(entry["target"].encode()).hexdigest()[:16]
        log = os.path.join(node.state, f"{mount_id}.log")
        flags = list(MOUNT_FLAGS[entry["mode"]])
        if entry["mode"] == "MOUNT_CACHED":
            port = _free_port()
            with open(os.path.join(node.state, f"{mount_id}.rc"), "w") as f:
                f.write(f"{port}\n")
            flags += ["--rc", "--rc-no-auth", f"--rc-addr=127.0.0.1:{port}"]
        cache = os.path.join(node.state, f"cache-{mount_id}")
        argv = [
            *node.rclone,
            "mount",
            entry["source"],
            target,
            *flags,
            "--cache-dir",
            cache,
            "--log-file",
            log,
        ]
        with open(log, "ab") as out:
            # Its own session: it outlives this job, and a cancel of the job does not reach it.
            rclone = subprocess.Popen(
                argv, env=node.env, stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True
            )
        deadline = time.monotonic() + _MOUNT_WAIT_S
        while not os.path.ismount(target):
            if rclone.poll() is not None or time.monotonic() > deadline:
                with contextlib.suppress(ProcessLookupError):
                    rclone.kill()
                raise StorageFailed(
                    f"skyhop: mounting {entry.get('label') or entry['source']} failed:\n{_tail(log)}"
                )
            time.sleep(_POLL_S)
    if target not in node.mounts():
        with open(os.path.join(node.state, "mounts"), "a") as f:
            f.write(target + "\n")


def flush(node: Node) -> None:
    """Wait until every cached mount of the node has uploaded what was written to it."""
    for port in node.control_ports():
        while True:
            try:
                request = urllib.request.Request(
                    f"http://127.0.0.1:{port}/vfs/stats", data=b"{}", method="POST"
                )
                with urllib.request.urlopen(request, timeout=30) as response:
                    cache = json.load(response).get("diskCache") or {}
            except (OSError, ValueError) as exc:
                raise StorageFailed(
                    f"skyhop: the cached mount with control port {port} is gone: {exc}"
                ) from None
            if cache.get("uploadsInProgress") == 0 and cache.get("uploadsQueued") == 0:
                break
            time.sleep(_FLUSH_POLL_S)


def detach(node: Node) -> None:
    """Flush the cached mounts, then unmount everything skyhop mounted on this node."""
    try:
        flush(node)
    except StorageFailed as exc:
        print(f"{exc}\nskyhop: unmounting with uploads still pending", file=sys.stderr)
    for target in node.mounts():
        for command in _UNMOUNT:
            with contextlib.suppress(OSError):
                if subprocess.run([*command, target], capture_output=True, check=False).returncode == 0:
                    break
    for name in os.listdir(node.state):
        if name == "mounts" or name.endswith(".rc"):
            os.remove(os.path.join(node.state, name))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _tail(path: str, lines: int = 5) -> str:
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:]).rstrip()
    except OSError:
        return ""


def main(argv: list[str]) -> int:
    """Entry point when run on a node."""
    command = argv[1] if len(argv) > 1 else ""
    try:
        node = Node()
        if command == "attach" and len(argv) == 3:
            attach(node, json.loads(argv[2]))
        elif command == "flush":
            flush(node)
        elif command == "detach":
            detach(node)
        else:
            print(f"usage: {argv[0]} attach ENTRIES_JSON | flush | detach", file=sys.stderr)
            return 2
    except StorageFailed as exc:
        print(exc, file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"skyhop: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
