"""A node driven through a shell command channel: the node runner is installed once, then every job
operation is one command running it.

The channel is the provider's (an SSH session, a Kubernetes exec); everything above it is the same
for every node reached that way. The runner and everything of the cluster live in the node's
runtime folder (``~/.skyhop-node/<cluster>-<rank>``); jobs run detached there, so they outlive the
channel and the worker, and any later worker reads their state and logs from the files.
"""

from __future__ import annotations

import json
import posixpath
import shlex
from abc import abstractmethod
from pathlib import Path

from pydantic import BaseModel

from skyhop.providers.base import NodeHandle, NodeRuntime
from skyhop.providers.runtime.jobs import JobSpec, JobsQuery, JobsReport, NodeJobState
from skyhop.providers.runtime.programs import NODE_PROGRAMS, program_hashes

__all__ = ["COMMAND_TIMEOUT_S", "Result", "ShellNodeRuntime", "home_of", "runtime_dir"]

COMMAND_TIMEOUT_S = 30.0
"""Default bound on one node command (job control and probes take milliseconds)."""
_HASHES = program_hashes()
_CANCEL_TIMEOUT_S = 60.0
"""Cancelling waits out the runner's grace period (5 s per call) before it kills."""
_NODE_FOLDER = ".skyhop-node"


class Result(BaseModel):
    """What one command on a node gave: its exit status and output."""

    exit_status: int
    stdout: bytes
    stderr: bytes

    def error_text(self) -> str:
        """The command's stderr (or stdout) as one line for an error message."""
        text = (self.stderr or self.stdout).decode(errors="replace").strip()
        return " ".join(text.splitlines()[-3:]) or f"exit status {self.exit_status}"


def runtime_dir(home: str, cluster_name: str, rank: int) -> str:
    """Where node ``rank`` of a cluster keeps its runner, workdir and jobs under ``home``."""
    return posixpath.join(home, _NODE_FOLDER, f"{cluster_name}-{rank}")


def home_of(node: NodeHandle) -> str:
    """The home a ``runtime_dir`` was made under."""
    return node.runtime_dir.rsplit(f"/{_NODE_FOLDER}/", 1)[0]


class ShellNodeRuntime(NodeRuntime):
    """Runtime of one node reached through a command channel; ``home`` resolves ``~`` and relative
    paths. Subclasses say how a command runs (``run``) and how files get there (``copy``)."""

    def __init__(self, node: NodeHandle, home: str) -> None:
        self.node = node
        self.home = home
        self.root = node.runtime_dir

    @property
    @abstractmethod
    def label(self) -> str:
        """The node as error messages name it."""

    @abstractmethod
    async def run(
        self, command: str, *, input: bytes | None = None, timeout: float = COMMAND_TIMEOUT_S
    ) -> Result:
        """Run a ``sh`` command line on the node; ``NodeUnreachableError`` when it gives no answer."""

    @abstractmethod
    async def copy(self, local_path: str, remote: str) -> None:
        """Copy a local folder's contents (the sync's ignore rules apply) or a file to ``remote``."""

    def _resolve(self, path: str, base: str) -> str:
        if path == "~" or path.startswith("~/"):
            return posixpath.normpath(posixpath.join(self.home, path[2:]))
        return posixpath.normpath(posixpath.join(base, path))

    async def _runner(
        self, *args: str, input: bytes | None = None, timeout: float = COMMAND_TIMEOUT_S
    ) -> Result:
        runner = posixpath.join(self.root, "node_runner.py")
        result = await self.run(
            shlex.join(["python3", "-I", "-S", runner, *args]), input=input, timeout=timeout
        )
        if result.exit_status != 0:
            raise OSError(f"node runner '{args[0]}' on {self.label} failed: {result.error_text()}")
        return result

    async def prepare(self) -> None:
        root = shlex.quote(self.root)
        check = f"mkdir -p {root} && cd {root} && sha256sum {shlex.join(NODE_PROGRAMS)} 2>/dev/null; true"
        found = (await self.run(check)).stdout.decode().split()
        installed = dict(zip(found[1::2], found[::2], strict=False))
        for name, source in NODE_PROGRAMS.items():
            if installed.get(name) == _HASHES[name]:
                continue
            program = shlex.quote(posixpath.join(self.root, name))
            install = await self.run(f"cat > {program}.tmp && mv -f {program}.tmp {program}", input=source)
            if install.exit_status != 0:
                raise OSError(f"installing {name} on {self.label} failed: {install.error_text()}")

    async def clean(self) -> None:
        """Stop every job of this node and remove its runtime folder (before reuse, and on terminate)."""
        quoted, runner = shlex.quote(self.root), shlex.quote(posixpath.join(self.root, "node_runner.py"))
        command = f"if [ -f {runner} ]; then python3 -I -S {runner} cancel-all {quoted}; fi; rm -rf {quoted}"
        result = await self.run(command, timeout=_CANCEL_TIMEOUT_S)
        if result.exit_status != 0:
            raise OSError(f"cleaning {self.root} on {self.label} failed: {result.error_text()}")

    async def sync_dir(self, local_dir: str, remote_path: str) -> None:
        await self.copy(local_dir, self._resolve(remote_path, self.root))

    async def put_path(self, local_path: str, remote_path: str) -> None:
        remote = self._resolve(remote_path, self.home)
        parent = posixpath.dirname(remote) if not Path(local_path).is_dir() else remote
        made = await self.run(f"mkdir -p {shlex.quote(parent)}")
        if made.exit_status != 0:
            raise OSError(f"creating {parent} on {self.label} failed: {made.error_text()}")
        await self.copy(local_path, remote)

    async def start_job(self, spec: JobSpec) -> None:
        cwd = self._resolve(spec.cwd, self.root) if spec.cwd else None
        payload = json.dumps(spec.model_copy(update={"cwd": cwd}).model_dump()).encode()
        await self._runner("start", self.root, spec.key, input=payload)

    async def job_state(self, key: str) -> NodeJobState | None:
        state = json.loads((await self._runner("state", self.root, key)).stdout)
        return None if state is None else NodeJobState.model_validate(state)

    async def watch_jobs(self, query: JobsQuery) -> JobsReport:
        report = await self._runner("watch", self.root, input=query.model_dump_json().encode())
        return JobsReport.model_validate_json(report.stdout)

    async def read_log(self, key: str, offset: int, limit: int = 1 << 20) -> bytes:
        return (await self._runner("log", self.root, key, str(offset), str(limit))).stdout

    async def cancel_job(self, key: str) -> None:
        await self._runner("cancel", self.root, key, timeout=_CANCEL_TIMEOUT_S)
