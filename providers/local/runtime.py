"""A node that is a folder on this machine: files are copied, jobs run under the node runner."""

from __future__ import annotations

import asyncio
import filecmp
import json
import os
import shutil
import sys
from pathlib import Path

from providers.base import NodeHandle, NodeRuntime
from providers.runtime import node_runner
from providers.runtime.jobs import JobSpec, NodeJobState
from providers.runtime.sync import rsync_command

__all__ = ["LocalNodeRuntime"]

_RUNNER_SOURCE = Path(node_runner.__file__)


class LocalNodeRuntime(NodeRuntime):
    """Runtime of a local node; its home (``~`` in remote paths) is its runtime folder."""

    def __init__(self, node: NodeHandle) -> None:
        self.node = node
        self.root = Path(node.runtime_dir)

    def _resolve(self, remote_path: str) -> Path:
        if remote_path.startswith("~/") or remote_path == "~":
            remote_path = remote_path[2:]
        return Path(remote_path) if os.path.isabs(remote_path) else self.root / remote_path

    async def prepare(self) -> None:
        runner = self.root / "node_runner.py"
        if runner.exists() and filecmp.cmp(runner, _RUNNER_SOURCE, shallow=False):
            return
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = runner.with_suffix(".tmp")
        shutil.copyfile(_RUNNER_SOURCE, tmp)
        os.replace(tmp, runner)

    async def sync_dir(self, local_dir: str, remote_path: str) -> None:
        dest = self._resolve(remote_path)
        dest.mkdir(parents=True, exist_ok=True)
        command = rsync_command(local_dir, str(dest))
        if command is None:
            await asyncio.to_thread(shutil.copytree, local_dir, dest, dirs_exist_ok=True)
            return
        proc = await asyncio.create_subprocess_exec(
            *command, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
        )
        _, stderr = await proc.communicate()
        if proc.returncode != 0:
            raise OSError(f"rsync of {local_dir} failed: {stderr.decode(errors='replace').strip()}")

    async def put_path(self, local_path: str, remote_path: str) -> None:
        if os.path.isdir(local_path):
            await self.sync_dir(local_path, remote_path)
            return
        dest = self._resolve(remote_path)
        dest.parent.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(shutil.copy2, local_path, dest)

    async def start_job(self, spec: JobSpec) -> None:
        cwd = str(self._resolve(spec.cwd)) if spec.cwd else None
        payload = json.dumps(spec.model_copy(update={"cwd": cwd}).model_dump()).encode()
        # The runner forks a daemon; it runs in its own process, never in this threaded one.
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-I",
            "-S",
            str(self.root / "node_runner.py"),
            "start",
            str(self.root),
            spec.key,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await proc.communicate(payload)
        if proc.returncode != 0:
            raise OSError(f"starting job {spec.key} failed: {err.decode(errors='replace').strip()}")

    async def job_state(self, key: str) -> NodeJobState | None:
        state = node_runner.read_state(str(self.root), key)
        return None if state is None else NodeJobState.model_validate(state)

    async def read_log(self, key: str, offset: int, limit: int = 1 << 20) -> bytes:
        return node_runner.read_log(str(self.root), key, offset, limit)

    async def cancel_job(self, key: str) -> None:
        await asyncio.to_thread(node_runner.cancel, str(self.root), key)

    async def cancel_all(self) -> None:
        """Cancel every job still running on this node (before its folder is removed)."""
        jobs = self.root / "jobs"
        keys = [p.name for p in jobs.iterdir()] if jobs.is_dir() else []
        await asyncio.gather(*(self.cancel_job(key) for key in keys))
