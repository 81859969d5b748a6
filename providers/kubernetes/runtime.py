"""A pod as a node: the shell runtime over the API server's exec, files as a tar stream over exec.

No SSH in the pod: every node runner command is one exec (``sh -c``); an exec that gets no answer
reads the pod, and one that ended (evicted, OOM-killed, deleted) is a ``NodeGoneError`` with the
status's reason, so its job fails at once saying why and the node is lost. A sync sends the files the
sync's ignore rules pick (``list_files``, the same as rsync would copy) as one tar archive on the
exec's stdin, unpacked in place. Nothing is deleted on the far side, as rsync without ``--delete``.
"""

from __future__ import annotations

import asyncio
import io
import os
import posixpath
import shlex
import tarfile

from skyhop.providers.base import KubernetesAccess, NodeHandle
from skyhop.providers.errors import ProviderError
from skyhop.providers.kubernetes.client import KUBE_THREADS, ContextApi
from skyhop.providers.kubernetes.pods import PodState, pod_state
from skyhop.providers.runtime.errors import NodeGoneError, NodeUnreachableError
from skyhop.providers.runtime.shell import COMMAND_TIMEOUT_S, Result, ShellNodeRuntime, home_of
from skyhop.providers.runtime.sync import list_files

__all__ = ["KubernetesNodeRuntime", "tar_of"]

_COPY_TIMEOUT_S = 600.0
_KILLED = 137
"""An exec's status when SIGKILL ended it: also what a container killed under it (OOM) gives."""


async def tar_of(local_path: str, name: str) -> bytes:
    """A tar archive of a folder's synced files (under ``.``) or of one file (as ``name``)."""
    if not os.path.isdir(local_path):
        return await asyncio.to_thread(_pack, [(local_path, name)])
    names = await list_files(local_path)
    members = [(os.path.join(local_path, n.rstrip("/")), n.rstrip("/")) for n in names]
    return await asyncio.to_thread(_pack, members)


def _pack(members: list[tuple[str, str]]) -> bytes:
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        for path, name in members:
            tar.add(path, arcname=name, recursive=False)
    return archive.getvalue()


class KubernetesNodeRuntime(ShellNodeRuntime):
    """Runtime of one pod, reached through its context's exec."""

    def __init__(self, node: NodeHandle, api: ContextApi) -> None:
        super().__init__(node, home_of(node))
        access = node.access
        if not isinstance(access, KubernetesAccess):
            raise TypeError(f"node {node.instance_id} is not a Kubernetes pod ({access.kind})")
        self.api, self.pod = api, access.pod

    @property
    def label(self) -> str:
        return f"pod {self.api.namespace}/{self.pod} ({self.api.context})"

    async def run(
        self, command: str, *, input: bytes | None = None, timeout: float = COMMAND_TIMEOUT_S
    ) -> Result:
        loop = asyncio.get_running_loop()
        try:
            result = await loop.run_in_executor(
                KUBE_THREADS, self.api.exec, self.pod, command, input, timeout
            )
        except NodeUnreachableError as exc:
            ended = await loop.run_in_executor(KUBE_THREADS, self._ended)
            if ended is not None:
                raise NodeGoneError(f"{self.label} {ended}") from exc
            raise
        if result.exit_status == _KILLED:  # the container may have been killed under the exec
            ended = await loop.run_in_executor(KUBE_THREADS, self._ended)
            if ended is not None:
                raise NodeGoneError(f"{self.label} {ended}")
        return result

    def _ended(self) -> str | None:
        """How the pod ended (its status's reason and message), or None while it may still answer."""
        try:
            pod = self.api.call(self.api.core.read_namespaced_pod, self.pod, self.api.namespace)
        except ProviderError as exc:
            return "was deleted" if exc.code == "NotFound" else None
        state, why = pod_state(pod)
        return f"ended: {why}" if state is PodState.ENDED else None

    async def copy(self, local_path: str, remote: str) -> None:
        is_dir = os.path.isdir(local_path)
        target = remote if is_dir else posixpath.dirname(remote)
        archive = await tar_of(local_path, posixpath.basename(remote))
        folder = shlex.quote(target)
        unpack = f"mkdir -p {folder} && tar -x -o -m -f - -C {folder}"
        result = await self.run(unpack, input=archive, timeout=_COPY_TIMEOUT_S)
        if result.exit_status != 0:
            raise OSError(f"copying {local_path} to {self.label} failed: {result.error_text()}")
