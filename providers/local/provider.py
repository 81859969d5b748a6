"""This machine as a cloud: a node is a folder under ``~/.skyhop/clusters/<name>/`` running real processes.

The offering names this machine (``Offering.host``), so a cluster made here is bound to it: its
activities run on this machine's task queues, and another worker never looks for its folders.

Stopping a node kills its processes and keeps its folder (its disk), marked by a ``stopped`` file;
starting removes the mark. A node whose folder is gone has been terminated.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import uuid
from pathlib import Path
from typing import ClassVar

from skyhop.providers.base import (
    Capabilities,
    ClusterHandle,
    LocalAccess,
    NodeHandle,
    NodeRuntime,
    NodeStatus,
    Offering,
    Provider,
    ProvisionRequest,
)
from skyhop.providers.home import host_id, skyhop_home
from skyhop.providers.local.runtime import FOLDER_NODE_CAPABILITIES, LocalNodeRuntime
from skyhop.providers.runtime.mounts import unmount_under

__all__ = ["LocalProvider"]


def _memory_gib() -> float:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1024**3


class LocalProvider(Provider):
    """One offering, the size of this machine, free of charge."""

    name = "local"
    capabilities: ClassVar[Capabilities] = FOLDER_NODE_CAPABILITIES

    def offerings(self) -> list[Offering]:
        return [
            Offering(
                provider=self.name,
                instance_type="local",
                cpus=float(os.cpu_count() or 1),
                memory_gib=round(_memory_gib(), 1),
                price=0.0,
                host=host_id(),
            )
        ]

    def _cluster_dir(self, cluster_name: str) -> Path:
        return skyhop_home() / "clusters" / cluster_name

    def _node(self, cluster_name: str, rank: int) -> NodeHandle:
        return NodeHandle(
            rank=rank,
            instance_id=f"{cluster_name}-{rank}",
            ip="127.0.0.1",
            runtime_dir=str(self._cluster_dir(cluster_name) / f"node-{rank}"),
            access=LocalAccess(),
        )

    async def launch(self, request: ProvisionRequest) -> ClusterHandle:
        self.refuse_unsupported(request)
        name = request.cluster_name
        nodes = [self._node(name, rank) for rank in range(request.num_nodes)]
        # Starting prepares every node; on a stopped cluster it also starts the nodes again.
        return await self.start(ClusterHandle(cluster_name=name, offering=request.offering, nodes=nodes))

    async def terminate(self, handle: ClusterHandle) -> None:
        """Stop the nodes' jobs, then remove the cluster's folder, moved aside first: a killed job's
        waiting shell writes its exit code into the job's folder as it ends, and one that did so
        while the folder was being removed left that folder behind (a cluster that was down)."""
        await asyncio.gather(*(LocalNodeRuntime(node).cancel_all() for node in handle.nodes))
        folder = self._cluster_dir(handle.cluster_name)
        await asyncio.to_thread(unmount_under, folder)
        gone = folder.with_name(f".{folder.name}.removing-{uuid.uuid4().hex[:8]}")
        try:
            folder.rename(gone)
        except FileNotFoundError:
            return
        await asyncio.to_thread(shutil.rmtree, gone, True)

    async def remove_untracked(self, cluster_name: str) -> list[str]:
        """The folders this provider made for the cluster's nodes."""
        folder = self._cluster_dir(cluster_name)
        ranks = sorted(int(p.name.removeprefix("node-")) for p in folder.glob("node-[0-9]*") if p.is_dir())
        nodes = [self._node(cluster_name, rank) for rank in ranks]
        if nodes:
            offering = Offering(provider=self.name, instance_type="local", cpus=0, memory_gib=0, price=0)
            await self.terminate(ClusterHandle(cluster_name=cluster_name, offering=offering, nodes=nodes))
        return [node.instance_id for node in nodes]

    def runtime(self, node: NodeHandle) -> NodeRuntime:
        return LocalNodeRuntime(node)

    async def stop(self, handle: ClusterHandle) -> None:
        await asyncio.gather(*(LocalNodeRuntime(node).cancel_all() for node in handle.nodes))
        for node in handle.nodes:
            folder = Path(node.runtime_dir)
            if folder.is_dir():
                (folder / _STOPPED).touch()

    async def start(self, handle: ClusterHandle, request: ProvisionRequest | None = None) -> ClusterHandle:
        # A folder node has nothing a request could change (market, image, disk): it is not read.
        for node in handle.nodes:
            (Path(node.runtime_dir) / _STOPPED).unlink(missing_ok=True)
        await asyncio.gather(*(self.runtime(node).prepare() for node in handle.nodes))
        return handle

    async def node_statuses(self, handle: ClusterHandle) -> list[NodeStatus]:
        return [_status(Path(node.runtime_dir)) for node in handle.nodes]


_STOPPED = "stopped"


def _status(folder: Path) -> NodeStatus:
    if not folder.is_dir():
        return NodeStatus.TERMINATED
    return NodeStatus.STOPPED if (folder / _STOPPED).exists() else NodeStatus.UP
