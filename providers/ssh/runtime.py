"""A node that is an SSH host: the node runner is uploaded once and driven over asyncssh.

The runner and everything of the cluster live in the node's runtime folder
(``~/.skyhop-node/<cluster>-<rank>``); jobs run detached there, so they outlive the SSH
connection and the worker, and any later worker reads their state and logs from the files.
"""

from __future__ import annotations

import json
import posixpath
import shlex
from pathlib import Path

from skyhop.providers.base import NodeHandle, NodeRuntime
from skyhop.providers.runtime.jobs import JobSpec, JobsQuery, JobsReport, NodeJobState
from skyhop.providers.runtime.programs import NODE_PROGRAMS, program_hashes
from skyhop.providers.ssh.connection import Endpoint, Result, run
from skyhop.providers.ssh.transfer import rsync_to, sftp_to

__all__ = ["SSHNodeRuntime", "runtime_dir"]

_HASHES = program_hashes()
_CANCEL_TIMEOUT_S = 60.0
"""Cancelling waits out the runner's grace period (5 s per call) before it kills."""


def runtime_dir(home: str, cluster_name: str, rank: int) -> str:
    """Where node ``rank`` of a cluster keeps its runner, workdir and jobs on a host."""
    return posixpath.join(home, ".skyhop-node", f"{cluster_name}-{rank}")


class SSHNodeRuntime(NodeRuntime):
    """Runtime of one node reached over SSH; ``home`` resolves ``~`` and relative paths."""

    def __init__(self, node: NodeHandle, endpoint: Endpoint, home: str, has_rsync: bool) -> None:
        self.node = node
        self.endpoint = endpoint
        self.home = home
        self.has_rsync = has_rsync
        self.root = node.runtime_dir

    def _resolve(self, path: str, base: str) -> str:
        if path == "~" or path.startswith("~/"):
            return posixpath.normpath(posixpath.join(self.home, path[2:]))
        return posixpath.normpath(posixpath.join(base, path))

    async def _runner(self, *args: str, input: bytes | None = None, timeout: float = 30.0) -> Result:
        runner = posixpath.join(self.root, "node_runner.py")
        command = shlex.join(["python3", "-I", "-S", runner, *args])
        result = await run(self.endpoint, command, input=input, timeout=timeout)
        if result.exit_status != 0:
            raise OSError(f"node runner '{args[0]}' on {self.endpoint.label} failed: {result.error_text()}")
        return result

    async def prepare(self) -> None:
        root = shlex.quote(self.root)
        check = f"mkdir -p {root} && cd {root} && sha256sum {shlex.join(NODE_PROGRAMS)} 2>/dev/null; true"
        found = (await run(self.endpoint, check)).stdout.decode().split()
        installed = dict(zip(found[1::2], found[::2], strict=False))
        for name, source in NODE_PROGRAMS.items():
            if installed.get(name) == _HASHES[name]:
                continue
            program = shlex.quote(posixpath.join(self.root, name))
            install = await run(
                self.endpoint, f"cat > {program}.tmp && mv -f {program}.tmp {program}", input=source
            )
            if install.exit_status != 0:
                raise OSError(f"installing {name} on {self.endpoint.label} failed: {install.error_text()}")

    async def clean(self) -> None:
        """Stop every job of this node and remove its runtime folder (before reuse, and on terminate)."""
        quoted, runner = shlex.quote(self.root), shlex.quote(posixpath.join(self.root, "node_runner.py"))
        command = f"if [ -f {runner} ]; then python3 -I -S {runner} cancel-all {quoted}; fi; rm -rf {quoted}"
        result = await run(self.endpoint, command, timeout=_CANCEL_TIMEOUT_S)
        if result.exit_status != 0:
            raise OSError(f"cleaning {self.root} on {self.endpoint.label} failed: {result.error_text()}")

    async def sync_dir(self, local_dir: str, remote_path: str) -> None:
        await self._copy(local_dir, self._resolve(remote_path, self.root))

    async def put_path(self, local_path: str, remote_path: str) -> None:
        remote = self._resolve(remote_path, self.home)
        parent = posixpath.dirname(remote) if not Path(local_path).is_dir() else remote
        made = await run(self.endpoint, f"mkdir -p {shlex.quote(parent)}")
        if made.exit_status != 0:
            raise OSError(f"creating {parent} on {self.endpoint.label} failed: {made.error_text()}")
        await self._copy(local_path, remote)

    async def _copy(self, local_path: str, remote: str) -> None:
        if self.has_rsync:
            await rsync_to(self.endpoint, local_path, remote)
        else:
            await sftp_to(self.endpoint, local_path, remote)

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
