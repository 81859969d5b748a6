"""The lifecycle every tagged-instance cloud shares, written once over a few primitives.

A provider built on ``CloudProvider`` implements only the cloud calls (list the cluster's
instances by tag, create some ranks, terminate/stop/start ids) and how to reach a node; the
idempotent provision attempt, waiting, and partial-failure handling live here. Instances carry
the cluster name and node rank as tags, so a retried attempt finds what an earlier one created
and creates only the missing ranks.
"""

from __future__ import annotations

import asyncio
import time
from abc import abstractmethod
from collections.abc import Hashable
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel

from skyhop.providers.base import (
    CannotStopError,
    ClusterHandle,
    NodeHandle,
    NodeStatus,
    Offering,
    Provider,
    ProvisionRequest,
)
from skyhop.providers.catalog import Catalog, load_catalogs
from skyhop.providers.catalog.cache import file_stamp
from skyhop.providers.errors import CapacityError, ProviderError

__all__ = ["CLUSTER_TAG", "RANK_TAG", "CloudProvider", "Instance", "InstanceState", "catalog_offerings"]

CLUSTER_TAG = "skyhop-cluster"
RANK_TAG = "skyhop-node-rank"


class InstanceState(StrEnum):
    """An instance's lifecycle state, common to every cloud."""

    PENDING = "pending"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"
    TERMINATED = "terminated"


class Instance(BaseModel):
    """One instance of a cluster as the cloud's API describes it."""

    instance_id: str
    rank: int
    zone: str | None
    state: InstanceState
    private_ip: str | None = None
    public_ip: str | None = None


_NODE_STATUS = {
    InstanceState.PENDING: NodeStatus.UP,
    InstanceState.RUNNING: NodeStatus.UP,
    InstanceState.STOPPING: NodeStatus.STOPPED,
    InstanceState.STOPPED: NodeStatus.STOPPED,
    InstanceState.TERMINATED: NodeStatus.TERMINATED,
}


_OFFERINGS: dict[tuple[int, str], tuple[Catalog, list[Offering]]] = {}
"""Offerings built per catalog object (the catalog cache keeps one per file version), with the
catalog held so its id stays its own: a 3,500-row catalog took 20 ms to build again, once per
optimization, and a managed job's launch and each relaunch optimize."""
_OFFERINGS_KEPT = 8


def catalog_offerings(catalog: Catalog, provider: str) -> list[Offering]:
    """One offering per instance type and location of ``catalog``, relabelled as ``provider``."""
    key = (id(catalog), provider)
    if key not in _OFFERINGS:
        if len(_OFFERINGS) >= _OFFERINGS_KEPT:
            _OFFERINGS.pop(next(iter(_OFFERINGS)))  # the oldest: a catalog since replaced
        _OFFERINGS[key] = (catalog, _build_offerings(catalog, provider))
    return list(_OFFERINGS[key][1])


def _build_offerings(catalog: Catalog, provider: str) -> list[Offering]:
    result = []
    for name, itype in catalog.types.items():
        accelerators = {itype.accelerator: itype.accelerator_count} if itype.accelerator else {}
        for region, zone, price, spot in catalog.locations.get(name, []):
            if price is None:
                continue
            result.append(
                Offering(
                    provider=provider,
                    instance_type=name,
                    cpus=itype.cpus,
                    memory_gib=itype.memory_gib,
                    accelerators=accelerators,
                    region=region,
                    zone=zone,
                    price=price,
                    spot_price=spot,
                )
            )
    return result


class CloudProvider(Provider):
    """A provider whose nodes are cloud instances tagged with cluster name and node rank."""

    boot_timeout_s = 600.0
    """How long an instance may stay pending before the attempt counts as out of capacity."""
    poll_interval_s = 1.0

    def catalog(self) -> Catalog:
        """What this provider offers: its own shipped or fetched catalog."""
        return load_catalogs().get(self.name)

    def offerings(self) -> list[Offering]:
        return catalog_offerings(self.catalog(), self.name)

    def offerings_stamp(self) -> Hashable | None:
        """The catalog file's stamp: thousands of offerings would take as long to compare as to rank."""
        return file_stamp(Path(self.catalog().source))

    @abstractmethod
    async def list_instances(self, cluster_name: str, region: str | None) -> list[Instance]:
        """The cluster's instances in ``region`` that are not terminated."""

    @abstractmethod
    async def create_instances(self, request: ProvisionRequest, ranks: list[int]) -> None:
        """Create one tagged instance per rank in the request's zone; may fail after creating some."""

    @abstractmethod
    async def terminate_instances(self, region: str | None, instances: list[Instance]) -> None:
        """Terminate these instances (idempotent)."""

    @abstractmethod
    def node(self, request: ProvisionRequest, instance: Instance) -> NodeHandle:
        """How the command runner reaches this instance."""

    async def stop_instances(self, region: str | None, instances: list[Instance]) -> None:
        """Stop these instances, keeping their disks."""
        raise CannotStopError(f"provider {self.name!r} cannot stop clusters")

    async def start_instances(self, region: str | None, instances: list[Instance]) -> None:
        """Start these stopped instances."""
        raise CannotStopError(f"provider {self.name!r} cannot start stopped clusters")

    async def preempted(self, handle: ClusterHandle, gone: list[str]) -> set[str]:
        """Which of the cluster's instances ``gone`` (no longer listed) the cloud took back (a spot
        instance reclaimed) rather than someone removing them. Default: none is known to be."""
        return set()

    async def after_running(self, handle: ClusterHandle, request: ProvisionRequest) -> None:
        """Finish a cluster whose instances all run (e.g. install the node runner); idempotent."""

    async def launch(self, request: ProvisionRequest) -> ClusterHandle:
        self.refuse_unsupported(request)
        region, zone = request.offering.region, request.offering.zone
        try:
            found = await self.list_instances(request.cluster_name, region)
        except ProviderError as exc:
            # Nothing was asked of the cloud yet, so nothing is left to remove: compensation,
            # whose own lookup would fail the same way (no credentials), must not run.
            exc.leftover = False
            raise
        mine = {i.rank: i for i in found if i.rank < request.num_nodes and (zone is None or i.zone == zone)}
        try:
            stopped = [i for i in mine.values() if i.state in (InstanceState.STOPPING, InstanceState.STOPPED)]
            if stopped:
                await self.start_instances(region, stopped)
            missing = [rank for rank in range(request.num_nodes) if rank not in mine]
            if missing:
                await self.create_instances(request, missing)
            instances = await self._wait_running(request)
        except ProviderError as exc:
            exc.leftover = bool(found) or exc.leftover
            raise
        handle = ClusterHandle(
            cluster_name=request.cluster_name,
            offering=request.offering,
            use_spot=request.use_spot,
            nodes=[self.node(request, i) for i in instances],
        )
        await self.after_running(handle, request)
        return handle

    async def _wait_running(self, request: ProvisionRequest) -> list[Instance]:
        """Poll until every rank runs; a rank that dies or never boots is a capacity failure."""
        deadline = time.monotonic() + self.boot_timeout_s
        while True:
            found = await self.list_instances(request.cluster_name, request.offering.region)
            zone = request.offering.zone
            by_rank = {i.rank: i for i in found if zone is None or i.zone == zone}
            ranks = range(request.num_nodes)
            lost = [r for r in ranks if r not in by_rank]
            if lost:
                raise CapacityError(
                    f"{len(lost)} of {request.num_nodes} nodes did not come up (lost ranks {lost})",
                    "PartialCapacity",
                )
            if all(by_rank[r].state == InstanceState.RUNNING for r in ranks):
                return [by_rank[r] for r in ranks]
            if time.monotonic() > deadline:
                raise CapacityError(
                    f"nodes did not reach running within {self.boot_timeout_s:g}s", "BootTimeout"
                )
            await asyncio.sleep(self.poll_interval_s)

    async def terminate(self, handle: ClusterHandle) -> None:
        region = handle.offering.region
        await self.terminate_instances(region, await self.list_instances(handle.cluster_name, region))

    async def remove_untracked(self, cluster_name: str) -> list[str]:
        """Every instance tagged with the cluster's name, in every region the provider offers:
        nothing tells which one a stuck cluster is in."""
        removed: list[str] = []
        for region in sorted({o.region for o in self.offerings() if o.region}):
            alive = [
                i
                for i in await self.list_instances(cluster_name, region)
                if i.state != InstanceState.TERMINATED
            ]
            if alive:
                await self.terminate_instances(region, alive)
            removed += [i.instance_id for i in alive]
        return removed

    async def stop(self, handle: ClusterHandle) -> None:
        region = handle.offering.region
        running = [
            i
            for i in await self.list_instances(handle.cluster_name, region)
            if i.state in (InstanceState.PENDING, InstanceState.RUNNING)
        ]
        if running:
            await self.stop_instances(region, running)

    async def start(self, handle: ClusterHandle, request: ProvisionRequest | None = None) -> ClusterHandle:
        return await self.launch(request or handle.request())

    async def node_statuses(self, handle: ClusterHandle) -> list[NodeStatus]:
        region = handle.offering.region
        found = {i.instance_id: i for i in await self.list_instances(handle.cluster_name, region)}
        gone = [n.instance_id for n in handle.nodes if n.instance_id not in found]
        taken_back = await self.preempted(handle, gone) if gone and handle.use_spot else set()
        return [
            _NODE_STATUS[found[n.instance_id].state]
            if n.instance_id in found
            else NodeStatus.PREEMPTED
            if n.instance_id in taken_back
            else NodeStatus.TERMINATED
            for n in handle.nodes
        ]
