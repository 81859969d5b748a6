"""A node that is a folder on this machine: files are copied, jobs run under the node runner.

The folder is the node's home: ``~`` in a remote path, relative paths, the workdir (``~/workdir``)
and ``$HOME`` of every job and setup all mean it, so a job finds ``~/data.csv`` where the file
mount put it. Its jobs see this machine's filesystem, so an absolute target (``/etc/passwd``)
would be this machine's file: it is refused, and no path may leave the folder, through ``..``
or through a symlink.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

from skyhop.providers.base import Capabilities, LocalAccess, NodeHandle, NodeRuntime
from skyhop.providers.runtime import node_runner
from skyhop.providers.runtime.errors import NodeGoneError
from skyhop.providers.runtime.jobs import JobSpec, JobsQuery, JobsReport, NodeJobState
from skyhop.providers.runtime.programs import NODE_PROGRAMS
from skyhop.providers.runtime.sync import rsync_command
from skyhop.spec.limits import MAX_FOLDER_NODES

__all__ = ["FOLDER_NODE_CAPABILITIES", "LocalNodeRuntime", "OutsideNodeError"]

FOLDER_NODE_CAPABILITIES = Capabilities(multi_node=True, max_nodes=MAX_FOLDER_NODES, absolute_paths=False)
"""What a provider whose nodes are folders on this machine can do (``local``, ``sim``)."""


class OutsideNodeError(ValueError):
    """A remote path would land outside the node's folder; the task must name another."""


class LocalNodeRuntime(NodeRuntime):
    """Runtime of a local node; its home (``~`` in remote paths) is its runtime folder."""

    in_process = True

    def __init__(self, node: NodeHandle) -> None:
        self.node = node
        self.root = Path(node.runtime_dir)
        self._states: node_runner.StatesSeen = {}
        """The job states this runtime parsed: a watch hub asks each node every cycle."""

    def _resolve(self, remote_path: str) -> Path:
        """Where ``remote_path`` is inside the node's folder, symlinks followed; never outside it."""
        relative = remote_path[2:] if remote_path.startswith("~/") or remote_path == "~" else remote_path
        if os.path.isabs(relative):
            raise OutsideNodeError(
                f"remote path {remote_path!r} is absolute, but a node here is a folder on this machine "
                "and its jobs see this machine's files; use a path under ~"
            )
        root = self.root.resolve()
        path = (root / relative).resolve()
        if not path.is_relative_to(root):
            raise OutsideNodeError(f"remote path {remote_path!r} leads outside the node's folder")
        return path

    async def prepare(self) -> None:
        for name, source in NODE_PROGRAMS.items():
            program = self.root / name
            if program.exists() and program.read_bytes() == source:
                continue
            self.root.mkdir(parents=True, exist_ok=True)
            tmp = program.with_suffix(".tmp")
            tmp.write_bytes(source)
            os.replace(tmp, program)

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
        if not (self.root / "node_runner.py").is_file():
            # Its machine was terminated (a preempted sim node's folder goes with it): starting
            # again can never work, and the caller must hear "gone", not retry an OSError forever.
            raise NodeGoneError(f"node {self.node.rank} is gone (its folder {self.root} was removed)")
        cwd = str(self._resolve(spec.cwd)) if spec.cwd else None
        env = {"HOME": str(self.root), **spec.env}  # the task's own HOME, if it sets one, wins
        job = spec.model_copy(update={"cwd": cwd, "env": env}).model_dump()
        staged = await asyncio.to_thread(node_runner.stage, str(self.root), spec.key, job)
        # The claim and the runner's waiter, with no Python interpreter in between
        # (``node_runner._DETACH``); spawned, never forked from this threaded process.
        netns = self.node.access.netns if isinstance(self.node.access, LocalAccess) else None
        inside = ["ip", "netns", "exec", netns] if netns else []  # the job's machine: its network
        runner = str(self.root / "node_runner.py")
        proc = await asyncio.create_subprocess_exec(
            *inside,
            *node_runner.waiter_argv(runner, str(self.root), spec.key, staged, job),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        _, err = await proc.communicate()
        if proc.returncode == node_runner.EXISTS:
            return  # a start before this one (a retried activity's) claimed it: it runs once
        if proc.returncode != 0:
            raise OSError(f"starting job {spec.key} failed: {err.decode(errors='replace').strip()}")

    async def job_state(self, key: str) -> NodeJobState | None:
        state = node_runner.read_state(str(self.root), key)
        return None if state is None else NodeJobState.model_validate(state)

    async def watch_jobs(self, query: JobsQuery) -> JobsReport:
        report = node_runner.watch(
            str(self.root), query.keys, query.prefix, query.newer_than, query.known, self._states
        )
        return JobsReport.model_validate(report)

    def runner_pid(self, key: str) -> int | None:
        seen = self._states.get(node_runner.state_path(str(self.root), key))
        if seen is None or seen[1].get("status") != node_runner.RUNNING:
            return None
        pid = seen[1].get("runner_pid")
        return pid if isinstance(pid, int) else None

    async def read_log(self, key: str, offset: int, limit: int = 1 << 20) -> bytes:
        return node_runner.read_log(str(self.root), key, offset, limit)

    async def cancel_job(self, key: str) -> None:
        await asyncio.to_thread(node_runner.cancel, str(self.root), key)

    async def cancel_all(self) -> None:
        """Cancel every job still running on this node, and remove the image its setup kept (before
        its folder is removed)."""
        jobs = self.root / "jobs"
        keys = [p.name for p in jobs.iterdir()] if jobs.is_dir() else []
        await asyncio.gather(*(self.cancel_job(key) for key in keys))
        await asyncio.to_thread(node_runner.remove_node_image, str(self.root))
