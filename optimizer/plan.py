"""Choosing where one task runs: every alternative x every provider -> candidates -> the best.

The objective is dollars for the task's estimated runtime (price x nodes x hours) or, with
``minimize="time"``, the hours, cost breaking ties. Remaining ties break in a documented order:
provider name, the provider's own region order (``Offering.preference``: Kubernetes'
``allowed_contexts``), region, zone, instance type, so the same catalogs always give the same plan.
``any_of`` (and an accelerator set) pools the alternatives, so the cheapest wins; ``ordered`` (and
an accelerator list) takes the first alternative that has any unblocked candidate.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Literal

from pydantic import BaseModel

from skyhop.optimizer.blocklist import Blocklist
from skyhop.optimizer.capabilities import shortfall, task_needs
from skyhop.optimizer.egress import egress
from skyhop.optimizer.errors import NoFeasibleOfferingError
from skyhop.optimizer.explain import why_infeasible
from skyhop.optimizer.launchables import catalog_launchables, offering_filter
from skyhop.providers.base import (
    AcceleratorArgs,
    DiskTier,
    NetworkTier,
    NodeRequest,
    Offering,
    ProvisionRequest,
)
from skyhop.providers.catalog import CLOUDS, CatalogSet, load_catalogs, policy_for
from skyhop.providers.overrides import ProviderOverrides
from skyhop.spec import DagTask, Resources, Task

__all__ = [
    "Candidate",
    "Minimize",
    "Plan",
    "flat_offerings",
    "load_offerings",
    "offerings_stamp",
    "optimize",
    "task_candidates",
]

Minimize = Literal["cost", "time"]
SortKey = tuple[float, float, str, int, str, str, str]
_KEPT_PER_PROVIDER = 8
"""Candidates a plan keeps per provider and alternative (for the table, JSON and failover hints)."""


class Candidate(BaseModel):
    """An offering priced for one task, with everything its alternative says about how to launch it.

    The chosen candidate is what a launch provisions, whole: the market, image, disk and ports come
    from the ``any_of``/``ordered`` item it satisfies, never from the outer resources, so the nodes
    are the ones the plan priced.
    """

    offering: Offering
    use_spot: bool = False
    """The market: spot when True, on-demand otherwise."""
    image_id: str | None = None
    """The image to boot in the offering's region (None: the provider's default)."""
    disk_size: int | None = None
    """GiB of the boot disk (None: the provider's default)."""
    disk_tier: DiskTier | None = None
    network_tier: NetworkTier | None = None
    labels: dict[str, str] = {}
    priority_class: str | None = None
    volumes: dict[str, str] = {}
    """The task's ``volumes`` (mount path -> PVC), which pinned it to their Kubernetes context."""
    ports: list[str] = []
    hourly_cost: float
    """$/hour for all nodes of the task."""
    hours: float = 1.0
    """Estimated runtime on this offering."""
    alternative: int = 0
    """Index of the request alternative (``any_of``/``ordered`` item) it satisfies."""
    input_cost: float = 0.0
    """$ to read the task's ``inputs`` from another cloud's bucket here."""
    node_request: NodeRequest | None = None
    """What the alternative asks of each node, for a provider that sizes a node to the task."""
    docker_image: str | None = None
    """The alternative's ``image_id: docker:IMAGE``, the image of a provider whose nodes are containers."""
    accelerator_args: AcceleratorArgs | None = None
    """The alternative's TPU options (runtime version, node name), for a TPU slice."""

    @property
    def cost(self) -> float:
        """Estimated $ for the whole run."""
        return self.hourly_cost * self.hours + self.input_cost

    def sort_key(self, minimize: Minimize) -> SortKey:
        """Objective first, then the documented tie-break order."""
        return _sort_key(self.offering, self.hours, self.cost, minimize)

    def request(
        self,
        cluster_name: str,
        num_nodes: int,
        attempt_id: str,
        overrides: ProviderOverrides | None = None,
    ) -> ProvisionRequest:
        """The provision attempt that brings up ``num_nodes`` nodes of this candidate, with the task's
        provider settings (``overrides``)."""
        return ProvisionRequest(
            cluster_name=cluster_name,
            offering=self.offering,
            num_nodes=num_nodes,
            use_spot=self.use_spot,
            ports=self.ports,
            image_id=self.image_id,
            disk_size=self.disk_size,
            disk_tier=self.disk_tier,
            network_tier=self.network_tier,
            labels=self.labels,
            priority_class=self.priority_class,
            volumes=self.volumes,
            attempt_id=attempt_id,
            node_request=self.node_request,
            container_image=self.docker_image,
            accelerator_args=self.accelerator_args,
            overrides=overrides or ProviderOverrides(),
        )


class Plan(BaseModel):
    """The chosen candidate for a task and the others considered, best first."""

    choice: Candidate
    """What to provision: the chosen offering with its market, image, disk, ports and alternative."""
    candidates: list[Offering]
    task_name: str | None = None
    num_nodes: int = 1
    minimize: Minimize = "cost"
    considered: list[Candidate] = []
    """The same candidates as ``candidates``, with their market, cost and runtime; best first."""

    @property
    def chosen(self) -> Offering:
        """The chosen offering."""
        return self.choice.offering

    @property
    def use_spot(self) -> bool:
        """Whether the chosen offering is to be launched as spot."""
        return self.choice.use_spot

    @property
    def hourly_cost(self) -> float:
        """Estimated $/hour for all nodes of the task."""
        return self.choice.hourly_cost

    @property
    def estimated_hours(self) -> float:
        """Estimated runtime on the chosen offering."""
        return self.choice.hours


def _catalogless() -> list[str]:
    """The enabled providers without a catalog (``local``, ``sim``...), which offer what they hold.

    The clouds are read from their catalogs instead, even once their provisioning is enabled.
    """
    from skyhop.providers.registry import provider_names

    return [name for name in provider_names() if name not in CLOUDS]


def flat_offerings(catalogs: CatalogSet, resources: Resources) -> list[Offering]:
    """Offerings of the providers without a catalog: all, or only the pinned ones."""
    from skyhop.providers.registry import get_provider

    names = _catalogless()
    if catalogs.restricted:
        pinned = {alt.cloud for alt in resources.alternatives}
        names = [n for n in names if n in pinned]
    return [o for name in names for o in get_provider(name).offerings()]


def offerings_stamp(catalogs: CatalogSet) -> Hashable | None:
    """Equal whenever everything an optimization reads besides its request is the same: the
    catalogs' files, the providers ``skyhop check`` enabled and what each without a catalog offers
    (``Provider.offerings_stamp``, after ``load_offerings``). None when one of them cannot tell."""
    from skyhop.providers.registry import get_provider, read_checks

    files = catalogs.stamp()
    offered = tuple((name, get_provider(name).offerings_stamp()) for name in _catalogless())
    if files is None or any(stamp is None for _, stamp in offered):
        return None
    checks = tuple(sorted((name, result.enabled) for name, result in read_checks().items()))
    return files, offered, checks


async def load_offerings(only: set[str] | None = None) -> None:
    """Let the providers without a catalog (``only`` those) fetch what their offerings come from
    (``Provider.load``: SSH pools are in Temporal), before the synchronous optimizer reads them."""
    import asyncio

    from skyhop.providers.registry import get_provider

    names = [name for name in _catalogless() if only is None or name in only]
    await asyncio.gather(*(get_provider(name).load() for name in names))


def task_candidates(
    node: DagTask,
    catalogs: CatalogSet,
    blocklist: Blocklist,
    minimize: Minimize,
    *,
    kept_per_provider: int | None = None,
) -> list[Candidate]:
    """Every candidate for the task, best first; for ``ordered``, only the first alternative's.

    With ``kept_per_provider``, only the best and the next that many per provider and alternative
    (what a plan keeps): the others are ranked on bare numbers and never built, since building a
    candidate was most of an optimization over a catalog of thousands of offerings.
    """
    from skyhop.providers.registry import disabled_provider_names

    resources = node.task.resources
    flat = flat_offerings(catalogs, resources)
    clouds = [name for name in catalogs.names if name not in disabled_provider_names()]
    pools: list[list[tuple[SortKey, int, Offering]]] = []
    for index, alternative in enumerate(resources.alternatives):
        # A provider that lacks what the task needs is no candidate: an attempt there would only fail.
        needs = task_needs(node.task, alternative)
        fits = offering_filter(alternative)
        able = {name: shortfall(name, needs) is None for name in {o.provider for o in flat}}
        offerings = [o for o in flat if able[o.provider] and fits(o) and not blocklist.blocks(o)]
        for name in clouds:
            policy = policy_for(name)
            if policy is not None and alternative.cloud in (None, name) and shortfall(name, needs) is None:
                offerings += catalog_launchables(alternative, catalogs.get(name), policy, blocklist)
        cap = alternative.max_hourly_cost
        offerings = [
            o
            for o in offerings
            if alternative.allows_region(o.region)
            and (cap is None or ((o.spot_price if alternative.use_spot else o.price) or 0.0) <= cap)
        ]
        pools.append([(_offering_key(node, alternative, o, minimize), index, o) for o in offerings])
    if resources.ordered:
        pools = [next((pool for pool in pools if pool), [])]
    ranked = sorted((item for pool in pools for item in pool), key=lambda item: item[0])
    if not ranked:
        raise NoFeasibleOfferingError(why_infeasible(node.task, catalogs, flat, blocklist))
    if kept_per_provider is not None:
        ranked = _kept(ranked, kept_per_provider)
    sizes = [_node_request(alternative) for alternative in resources.alternatives]
    return [
        _priced(node, resources.alternatives[index], offering, index, sizes[index])
        for _, index, offering in ranked
    ]


def _kept(
    ranked: list[tuple[SortKey, int, Offering]], per_provider: int
) -> list[tuple[SortKey, int, Offering]]:
    """What ``plan_for`` keeps of ``ranked``: the best, and the first ``per_provider`` of each
    provider and alternative (the best counting in its own)."""
    kept: list[tuple[SortKey, int, Offering]] = []
    counts: dict[tuple[str, int], int] = {}
    for item in ranked:
        group = (item[2].provider, item[1])
        if not kept or counts.get(group, 0) < per_provider:
            kept.append(item)
        counts[group] = counts.get(group, 0) + 1
    return kept


def _offering_key(node: DagTask, resources: Resources, offering: Offering, minimize: Minimize) -> SortKey:
    """``offering``'s rank for the task, computed as ``_priced``'s candidate would rank."""
    price = offering.spot_price if resources.use_spot else offering.price
    hours = node.hours_on(offering.accelerators)
    cost = (price or 0.0) * node.task.num_nodes * hours + _input_cost(node, offering)
    return _sort_key(offering, hours, cost, minimize)


def _sort_key(offering: Offering, hours: float, cost: float, minimize: Minimize) -> SortKey:
    first, second = (hours, cost) if minimize == "time" else (cost, 0.0)
    return (
        round(first, 9),
        round(second, 9),
        offering.provider,
        offering.preference,
        offering.region or "",
        offering.zone or "",
        offering.instance_type,
    )


def _priced(
    node: DagTask, resources: Resources, offering: Offering, alternative: int, size: NodeRequest
) -> Candidate:
    price = offering.spot_price if resources.use_spot else offering.price
    # Every field is already a validated value: thousands of candidates skip validating them again.
    return Candidate.model_construct(
        offering=offering,
        use_spot=resources.use_spot,
        image_id=resources.image_for(offering.region),
        disk_size=resources.disk_size,
        disk_tier=resources.disk_tier,
        network_tier=resources.network_tier,
        labels=resources.labels,
        priority_class=resources.priority_class,
        volumes=node.task.volumes,
        ports=resources.ports or [],
        hourly_cost=(price or 0.0) * node.task.num_nodes,
        hours=node.hours_on(offering.accelerators),
        alternative=alternative,
        input_cost=_input_cost(node, offering),
        node_request=size,
        docker_image=resources.docker_image,
        accelerator_args=resources.accelerator_args,
    )


def _node_request(resources: Resources) -> NodeRequest:
    """The alternative's per-node ask: a ``4+`` is 4 (the least it takes), open fields stay None."""
    cpus, memory = resources.cpu_quantity, resources.memory_quantity
    per_cpu = memory is not None and memory.per_cpu
    return NodeRequest(
        cpus=None if cpus is None else cpus.value,
        memory_gib=None if memory is None or per_cpu else memory.value,
        memory_per_cpu=memory.value if memory is not None and per_cpu else None,
        accelerators=resources.node_accelerators or {},
    )


def _input_cost(node: DagTask, offering: Offering) -> float:
    """Egress of the task's inputs from their cloud to ``offering``'s (free within one cloud: SkyPilot
    knows a bucket's cloud, not its region)."""
    source = node.inputs_cloud
    if source is None or source == offering.provider or node.inputs_gb <= 0:
        return 0.0
    return egress(source, None, offering.provider, offering.region, node.inputs_gb)[0]


def plan_for(node: DagTask, found: list[Candidate], chosen: Candidate, minimize: Minimize) -> Plan:
    """A task's plan with ``chosen`` first and a bounded number of others per provider."""
    kept: list[Candidate] = [chosen]
    per_provider: dict[tuple[str, int], int] = {}
    for candidate in found:
        key = (candidate.offering.provider, candidate.alternative)
        if candidate is not chosen and per_provider.get(key, 0) < _KEPT_PER_PROVIDER:
            kept.append(candidate)
        per_provider[key] = per_provider.get(key, 0) + 1
    return Plan(
        choice=chosen,
        candidates=[c.offering for c in kept],
        task_name=node.task.name,
        num_nodes=node.task.num_nodes,
        minimize=minimize,
        considered=kept,
    )


def optimize(
    task: Task | DagTask,
    catalogs: CatalogSet | None = None,
    *,
    blocklist: Blocklist | None = None,
    minimize: Minimize = "cost",
) -> Plan:
    """The best offering for one task; raises NoFeasibleOfferingError saying why there is none."""
    node = task if isinstance(task, DagTask) else DagTask(task=task)
    found = task_candidates(
        node,
        catalogs or load_catalogs(),
        blocklist or Blocklist(),
        minimize,
        kept_per_provider=_KEPT_PER_PROVIDER,
    )
    return plan_for(node, found, found[0], minimize)
