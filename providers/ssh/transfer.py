"""Files to an SSH host: rsync over OpenSSH, or SFTP where the host has no rsync.

rsync runs with ``-e ssh`` under the same login, key and pinned host key as the command runner,
and gives up after ``_IO_TIMEOUT_S`` without progress. The SFTP path copies the files rsync
would (same ignore rules) and, like rsync's quick check, skips those whose size and mtime match.
SFTP carries whole-second mtimes only, so a file copied in the second it was written is marked
stale on the host (its mtime one second back) and sent again by the next sync: a same-size
rewrite later in that second is never taken for unchanged.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import stat
import time

from skyhop.providers.runtime.errors import NodeUnreachableError
from skyhop.providers.runtime.sync import RSYNC_COPY, list_files, rsync_filters
from skyhop.providers.ssh.connection import CONNECT_TIMEOUT_S, KEEPALIVE_COUNT, Endpoint, connect

__all__ = ["rsync_to", "sftp_to", "ssh_shell"]

_IO_TIMEOUT_S = 60
_SFTP_PARALLEL = 32
_UNREACHABLE_CODES = {12, 30, 35, 255}
"""rsync exit codes meaning the link failed (protocol stream, I/O timeouts, ssh), not the files."""


def ssh_shell(endpoint: Endpoint) -> str:
    """The ``ssh`` command line rsync uses as its remote shell."""
    argv = ["ssh", "-p", str(endpoint.port), "-l", endpoint.user, "-o", "BatchMode=yes",
            "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S:g}", "-o", "ServerAliveInterval=5",
            "-o", f"ServerAliveCountMax={KEEPALIVE_COUNT}", "-o", "LogLevel=ERROR"]  # fmt: skip
    if endpoint.identity_file:
        argv += ["-i", endpoint.identity_file, "-o", "IdentitiesOnly=yes"]
    if endpoint.known_hosts:
        argv += ["-o", f"UserKnownHostsFile={endpoint.known_hosts}", "-o", "StrictHostKeyChecking=yes",
                 "-o", "GlobalKnownHostsFile=/dev/null"]  # fmt: skip
    return shlex.join(argv)


def _remote(endpoint: Endpoint, path: str) -> str:
    host = f"[{endpoint.address}]" if ":" in endpoint.address else endpoint.address
    return f"{host}:{path}"


async def rsync_to(endpoint: Endpoint, local_path: str, remote_path: str) -> None:
    """rsync a folder (its contents, with ignore rules) or one file to ``remote_path``."""
    rsync = shutil.which("rsync")
    if rsync is None:
        raise OSError("rsync is not installed on this machine")
    source = (
        [*rsync_filters(local_path), local_path.rstrip("/") + "/"]
        if os.path.isdir(local_path)
        else [local_path]
    )
    command = [rsync, *RSYNC_COPY, f"--timeout={_IO_TIMEOUT_S}", "-e", ssh_shell(endpoint), *source,
               _remote(endpoint, remote_path)]  # fmt: skip
    proc = await asyncio.create_subprocess_exec(
        *command, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
    )
    try:
        _, stderr = await proc.communicate()
    except BaseException:
        proc.kill()
        await proc.wait()
        raise
    if proc.returncode == 0:
        return
    message = f"rsync of {local_path} to {endpoint.label} failed: {stderr.decode(errors='replace').strip()}"
    raise (NodeUnreachableError if proc.returncode in _UNREACHABLE_CODES else OSError)(message)


async def sftp_to(endpoint: Endpoint, local_path: str, remote_path: str) -> None:
    """Copy a folder (the files ``list_files`` picks) or one file over SFTP, skipping unchanged files."""
    import asyncssh

    is_dir = os.path.isdir(local_path)
    names = await list_files(local_path) if is_dir else [os.path.basename(local_path)]
    base = local_path if is_dir else os.path.dirname(local_path)
    conn = await connect(endpoint)
    try:
        async with conn.start_sftp_client() as sftp:
            if is_dir:
                await sftp.makedirs(remote_path, exist_ok=True)
                for folder in sorted(n for n in names if n.endswith("/")):
                    await sftp.makedirs(f"{remote_path}/{folder.rstrip('/')}", exist_ok=True)
            else:
                await sftp.makedirs(os.path.dirname(remote_path) or ".", exist_ok=True)
            limit = asyncio.Semaphore(_SFTP_PARALLEL)

            async def copy(name: str) -> None:
                local = os.path.join(base, name)
                remote = f"{remote_path}/{name}" if is_dir else remote_path
                async with limit:
                    await _copy_one(sftp, local, remote)

            await asyncio.gather(*(copy(n) for n in names if not n.endswith("/")))
    except (OSError, asyncssh.Error) as exc:
        if isinstance(exc, asyncssh.SFTPError) and not isinstance(exc, asyncssh.SFTPConnectionLost):
            raise OSError(f"SFTP copy of {local_path} to {endpoint.label} failed: {exc}") from None
        raise NodeUnreachableError(f"{endpoint.label}: {exc}") from None


async def _copy_one(sftp: object, local: str, remote: str) -> None:
    import asyncssh

    assert isinstance(sftp, asyncssh.SFTPClient)
    started = int(time.time())
    info = os.lstat(local)
    if stat.S_ISLNK(info.st_mode):
        if await sftp.lexists(remote):
            await sftp.remove(remote)
        await sftp.symlink(os.readlink(local), remote)
        return
    try:
        have = await sftp.stat(remote)
        if have.size == info.st_size and have.mtime == int(info.st_mtime):
            return
    except asyncssh.SFTPNoSuchFile:
        pass
    await sftp.put(local, remote, preserve=True)
    if int(info.st_mtime) >= started:
        await sftp.utime(remote, (int(info.st_atime), int(info.st_mtime) - 1))
