"""Why nothing fits, in one sentence, with what comes close.

The checks run from the coarsest cause to the finest (provider, what the providers cannot do,
region, accelerator name, accelerator count, providers ``skyhop check`` disabled, blocklist, spot,
size), so the message names the first thing to change.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from skyhop.optimizer.blocklist import Blocklist
from skyhop.optimizer.capabilities import shortfall, task_needs
from skyhop.optimizer.launchables import catalog_launchables, offering_filter
from skyhop.providers.base import CheckResult, Needs, Offering
from skyhop.providers.catalog import Catalog, CatalogSet, policy_for
from skyhop.providers.registry import nothing_offered, read_checks
from skyhop.spec import Resources, Task

__all__ = ["why_infeasible"]


def why_infeasible(task: Task, catalogs: CatalogSet, flat: list[Offering], blocklist: Blocklist) -> str:
    """The reason no offering satisfies ``task``, naming close alternatives."""
    alternatives = task.resources.alternatives
    checks = read_checks()
    reasons = [_why(alt, task_needs(task, alt), catalogs, flat, blocklist, checks) for alt in alternatives]
    hint = " (see 'skyhop show-gpus' for what is offered where)"
    disabled = [r for r in reasons if isinstance(r, _OnlyOnDisabled)]
    if len(disabled) == len(reasons):  # one sentence for them all: enabling any provider is the fix
        what = " or ".join(r.what for r in disabled)
        return _OnlyOnDisabled(what, frozenset().union(*(r.providers for r in disabled))).sentence(checks)
    texts = [r.sentence(checks) if isinstance(r, _OnlyOnDisabled) else r for r in reasons]
    if len(texts) == 1:
        return texts[0] + hint
    return "no alternative is feasible: " + "; ".join(f"[{i + 1}] {r}" for i, r in enumerate(texts)) + hint


@dataclass(frozen=True)
class _OnlyOnDisabled:
    """The request is offered, but only by providers ``skyhop check`` disabled."""

    what: str
    providers: frozenset[str]

    def sentence(self, checks: dict[str, CheckResult]) -> str:
        """Which providers, why each is disabled and how to set it up, and what to run then."""
        names = sorted(self.providers)
        why = []
        for name in names:
            result = checks[name]
            why.append(f"{name} ({'; '.join(x for x in (result.reason or 'disabled', result.hint) if x)})")
        which = "it is" if len(names) == 1 else "they are"
        return (
            f"{self.what} is offered only on {', '.join(names)}, and 'skyhop check' found {which} "
            f"disabled: {', '.join(why)}; set up credentials, then run 'skyhop check' again"
        )


def _why(
    resources: Resources,
    needs: Needs,
    catalogs: CatalogSet,
    flat: list[Offering],
    blocklist: Blocklist,
    checks: dict[str, CheckResult],
) -> str | _OnlyOnDisabled:
    cloud = resources.cloud
    names = [n for n in catalogs.names if cloud in (None, n)]
    flat = [o for o in flat if cloud in (None, o.provider)]
    allowed = {*names, *(o.provider for o in flat)}
    refused = {n: found for n in sorted(allowed) if (found := shortfall(n, needs)) is not None}
    if allowed and len(refused) == len(allowed):
        return "; ".join(f"{n} does not support {found.feature}" for n, found in refused.items())
    names = [n for n in names if n not in refused]
    flat = [o for o in flat if o.provider not in refused]
    if not names and not flat:
        empty = nothing_offered(cloud, resources.region) if cloud else None
        if empty is not None:
            return empty
        available = sorted(set(catalogs.names) | {o.provider for o in flat})
        where = "the catalog folder" if catalogs.restricted else "this installation"
        return f"infra {cloud!r} has no catalog in {where} (available: {', '.join(available) or 'none'})"
    loaded = [catalogs.get(n) for n in names]
    if resources.region:
        regions = {loc[0] for c in loaded for locs in c.locations.values() for loc in locs}
        regions |= {o.region for o in flat if o.region}
        if resources.region.lower() not in {r.lower() for r in regions}:
            close = difflib.get_close_matches(resources.region, sorted(regions), n=3)
            also = f"; close: {', '.join(close)}" if close else ""
            return f"{cloud or 'no provider'} has no region {resources.region!r}{also}"
    if resources.accelerators:
        reason = _accelerator_reason(resources, loaded, flat)
        if reason:
            return reason
    offered_by = {c.provider for c in loaded if _launchables(resources, c, Blocklist())}
    disabled = {name for name, result in checks.items() if not result.enabled}
    if offered_by - disabled or any(map(offering_filter(resources), flat)):
        blocked = len(blocklist.entries)
        return f"every candidate for {_describe(resources)} is blocked by failover ({blocked} entries)"
    if offered_by:
        return _OnlyOnDisabled(_describe(resources), frozenset(offered_by))
    if resources.use_spot and any(
        _launchables(resources.model_copy(update={"use_spot": False}), c, blocklist) for c in loaded
    ):
        return f"{_describe(resources)} is offered, but not as spot; drop use_spot"
    sizes = [(t.cpus, t.memory_gib, c.provider, t.name) for c in loaded for t in c.types.values()]
    sizes += [(o.cpus, o.memory_gib, o.provider, o.instance_type) for o in flat]
    largest = max(sizes) if sizes else None
    hint = (
        f"; the largest is {largest[2]} {largest[3]} with {largest[0]:g} vCPUs and {largest[1]:g} GiB"
        if largest
        else ""
    )
    return f"no offering satisfies {_describe(resources)}{hint}; try other cpus/memory or add '+'"


def _accelerator_reason(resources: Resources, loaded: list[Catalog], flat: list[Offering]) -> str | None:
    ((name, count),) = (resources.node_accelerators or {}).items()
    offers: list[tuple[float, str, str]] = []
    names: set[str] = set()
    for catalog in loaded:
        names |= catalog.accelerator_names()
        for t in catalog.types.values():
            if t.accelerator and t.accelerator.upper() == name:
                offers.append((t.accelerator_count, catalog.provider, t.name))
        for acc, n in catalog.attachable:
            if acc.upper() == name:
                offers.append((n, catalog.provider, f"a host VM with {n:g} {acc} attached"))
    for o in flat:
        names |= set(o.accelerators)
        offers += [
            (n, o.provider, o.instance_type) for acc, n in o.accelerators.items() if acc.upper() == name
        ]
    where = f" on {resources.cloud}" if resources.cloud else ""
    if not offers:
        upper = {n.upper(): n for n in names}
        close = [upper[n] for n in sorted(upper) if name in n or n in name]
        close += [
            upper[n]
            for n in difflib.get_close_matches(name, sorted(upper), n=3, cutoff=0.5)
            if upper[n] not in close
        ]
        alt = f"; did you mean {', '.join(close[:5])}?" if close else ""
        return f"no offering{where} has accelerator {name}{alt}"
    if not any(abs(n - count) <= 0.01 for n, _, _ in offers):
        counts = ", ".join(f"{name}:{n:g}" for n in sorted({n for n, _, _ in offers}))
        fewest = min(offers, key=lambda o: (o[0], o[1], o[2]))
        if count < fewest[0]:
            return (
                f"no offering{where} has {count:g} {name} on one node; the fewest is {fewest[0]:g} on "
                f"{fewest[1]} {fewest[2]}; offered: {counts}"
            )
        most = min(offers, key=lambda o: (-o[0], o[1], o[2]))
        similar = sorted(
            {
                f"{acc}:{n:g}"
                for acc, n in _counts(loaded, flat)
                if name in acc.upper() and acc.upper() != name and abs(n - count) <= 0.01
            }
        )
        alt = f"; did you mean {', '.join(similar)}?" if similar else ""
        return (
            f"no offering{where} has {count:g} {name} on one node; the most is {most[0]:g} on "
            f"{most[1]} {most[2]}; offered: {counts}{alt}"
        )
    return None


def _counts(loaded: list[Catalog], flat: list[Offering]) -> set[tuple[str, float]]:
    """Every (accelerator, count per node) offered, as SkyPilot's fuzzy suggestions search them."""
    pairs = {(t.accelerator, t.accelerator_count) for c in loaded for t in c.types.values() if t.accelerator}
    pairs |= {key for c in loaded for key in c.attachable}
    return pairs | {pair for o in flat for pair in o.accelerators.items()}


def _launchables(resources: Resources, catalog: Catalog, blocklist: Blocklist) -> list[Offering]:
    policy = policy_for(catalog.provider)
    return catalog_launchables(resources, catalog, policy, blocklist) if policy else []


def _describe(resources: Resources) -> str:
    parts = [resources.describe()]
    if resources.use_spot:
        parts.append("spot")
    if resources.infra:
        parts.append(f"on {resources.infra}")
    return " ".join(parts)
