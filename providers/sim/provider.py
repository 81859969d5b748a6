"""``sim``: a simulated cloud with a real catalog and a fault plan, whose nodes run real processes.

It goes through the same tagged-instance lifecycle as the real clouds (``CloudProvider``), so
failover, compensation and idempotency are exercised exactly as on AWS; only the API underneath
is ``SimCloud``'s file instead of a remote service.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from skyhop.providers.base import (
    CheckResult,
    ClusterHandle,
    LocalAccess,
    NodeHandle,
    NodeRuntime,
    ProvisionRequest,
)
from skyhop.providers.catalog import Catalog, CatalogError, load_catalogs
from skyhop.providers.catalog.cache import cached_catalog
from skyhop.providers.catalog.skyhop_csv import read_skyhop_csv
from skyhop.providers.cloud import CloudProvider, Instance, InstanceState
from skyhop.providers.errors import InvalidRequestError
from skyhop.providers.local.runtime import FOLDER_NODE_CAPABILITIES, LocalNodeRuntime
from skyhop.providers.sim.cloud import SimCloud
from skyhop.providers.sim.plan import PlanError

__all__ = ["SimProvider"]

T = TypeVar("T")


class SimProvider(CloudProvider):
    """The simulated cloud; configured by ``~/.skyhop/sim/plan.yaml`` (see ``providers.sim.plan``)."""

    name = "sim"
    capabilities = FOLDER_NODE_CAPABILITIES.model_copy(
        # As a cloud would: its nodes' ports are all reachable already, and a folder has no disk size.
        update={"spot": True, "stop_start": True, "open_ports": True, "disk_size": True}
    )
    boot_timeout_s = 30.0
    poll_interval_s = 0.05

    def __init__(self, cloud: SimCloud | None = None) -> None:
        self.cloud = cloud or SimCloud()

    def catalog(self) -> Catalog:
        """The plan's catalog file, else a copy of the AWS catalog."""
        path = self.cloud.plan().catalog
        if path is None:
            return load_catalogs().get("aws")
        source = Path(path).expanduser()
        return cached_catalog(source, lambda: read_skyhop_csv(self.name, source))

    async def check(self) -> CheckResult:
        """Enabled only once a plan file exists: a simulated cloud is never chosen by accident."""
        hint = f"to use the simulated cloud, write {self.cloud.plan_path} (an empty file will do)"
        if not self.cloud.plan_path.exists():
            return CheckResult(enabled=False, reason="not set up", hint=hint)
        try:
            count = len(await asyncio.to_thread(self.offerings))
        except (PlanError, CatalogError) as exc:
            return CheckResult(enabled=False, reason=str(exc), hint=hint)
        if not count:
            return CheckResult(enabled=False, reason="the sim catalog has no offerings", hint=hint)
        return CheckResult(enabled=True, reason=f"simulated cloud, {count} offerings")

    async def _api(self, call: Callable[[], T]) -> T:
        try:
            return await asyncio.to_thread(call)
        except PlanError as exc:
            raise InvalidRequestError(str(exc), "InvalidFaultPlan", leftover=False) from None

    async def list_instances(self, cluster_name: str, region: str | None) -> list[Instance]:
        items = await self._api(lambda: self.cloud.describe(cluster_name, region))
        return [
            Instance(
                instance_id=i["instance_id"],
                rank=i["rank"],
                zone=i["zone"],
                state=InstanceState(i["state"]),
                private_ip=i.get("address") or "127.0.0.1",
            )
            for i in items
        ]

    async def create_instances(self, request: ProvisionRequest, ranks: list[int]) -> None:
        offering = request.offering
        await self._api(
            lambda: self.cloud.run_instances(
                request.cluster_name,
                ranks,
                offering.region,
                offering.zone,
                offering.instance_type,
                request.use_spot,
            )
        )

    async def terminate_instances(self, region: str | None, instances: list[Instance]) -> None:
        await self._api(lambda: self.cloud.terminate([i.instance_id for i in instances]))

    async def stop_instances(self, region: str | None, instances: list[Instance]) -> None:
        await self._api(lambda: self.cloud.stop([i.instance_id for i in instances]))

    async def start_instances(self, region: str | None, instances: list[Instance]) -> None:
        await self._api(lambda: self.cloud.start([i.instance_id for i in instances]))

    def node(self, request: ProvisionRequest, instance: Instance) -> NodeHandle:
        """A folder on this machine; with the plan's ``network``, its processes run in the
        instance's namespace and its ip is the namespace's address."""
        ip = instance.private_ip or "127.0.0.1"
        return NodeHandle(
            rank=instance.rank,
            instance_id=instance.instance_id,
            ip=ip,
            runtime_dir=str(self.cloud.node_dir(instance.instance_id)),
            access=LocalAccess(netns=None if ip == "127.0.0.1" else self.cloud.netns(instance.instance_id)),
        )

    async def preempted(self, handle: ClusterHandle, gone: list[str]) -> set[str]:
        return await self._api(lambda: self.cloud.preempted(gone))

    async def after_running(self, handle: ClusterHandle, request: ProvisionRequest) -> None:
        await asyncio.gather(*(self.runtime(node).prepare() for node in handle.nodes))

    async def open_ports(self, handle: ClusterHandle, ports: list[str]) -> None:
        """Nothing to do: sim nodes' ports are reachable from this machine (through the plan's
        bridge when they have addresses of their own)."""

    def runtime(self, node: NodeHandle) -> NodeRuntime:
        return LocalNodeRuntime(node)
