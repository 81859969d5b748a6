"""A node that is an SSH host: the shell runtime over asyncssh, files by rsync (SFTP without it)."""

from __future__ import annotations

from skyhop.providers.base import NodeHandle
from skyhop.providers.runtime.shell import COMMAND_TIMEOUT_S, Result, ShellNodeRuntime, runtime_dir
from skyhop.providers.ssh.connection import Endpoint, run
from skyhop.providers.ssh.transfer import rsync_to, sftp_to

__all__ = ["SSHNodeRuntime", "runtime_dir"]


class SSHNodeRuntime(ShellNodeRuntime):
    """Runtime of one node reached over SSH; ``home`` resolves ``~`` and relative paths."""

    def __init__(self, node: NodeHandle, endpoint: Endpoint, home: str, has_rsync: bool) -> None:
        super().__init__(node, home)
        self.endpoint = endpoint
        self.has_rsync = has_rsync

    @property
    def label(self) -> str:
        return self.endpoint.label

    async def run(
        self, command: str, *, input: bytes | None = None, timeout: float = COMMAND_TIMEOUT_S
    ) -> Result:
        return await run(self.endpoint, command, input=input, timeout=timeout)

    async def copy(self, local_path: str, remote: str) -> None:
        if self.has_rsync:
            await rsync_to(self.endpoint, local_path, remote)
        else:
            await sftp_to(self.endpoint, local_path, remote)
