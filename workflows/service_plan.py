"""Which replicas a service launches and removes next: a pure function of its replicas and target.

- The current version runs ``target`` replicas: a failed one (FAILED, FAILED_PROBING, ...) is
  replaced (it is no longer live), a PENDING one counts as launched, and
  on a scale-down the replicas that serve nothing go first, then the newest.
- Replicas never number more than ``ceiling`` (``max_replicas``), updates included: one failed or
  SHUTTING_DOWN takes room until it leaves the list (its cluster is gone).
- A rolling update never lets the READY count fall below the target while there is room: an older
  version's replica goes only once the READY replicas without it still reach the target (one that
  is not READY goes at once: it serves nothing), and new replicas are launched at most ``surge``
  beyond the target while older ones remain. With no room left (the target is ``max_replicas``),
  the oldest READY replica goes first to make room for one new one, once the new ones launched so
  far are READY and no cluster is still leaving: the READY count dips by one, and to zero only
  when ``max_replicas`` is 1.
- A blue-green update (``UpdateMode.BLUE_GREEN``) launches the new version's whole set at once and
  holds its READY replicas back from the load balancer (``hold``) until all ``target`` are READY;
  then every old replica goes in the same plan, so one push swaps old for new. Without room for
  both sets under the ceiling it goes as a rolling update does.
- With spot replicas (``ondemand`` given), ``launch_ondemand`` of the launches run on-demand, as
  many as the current version lacks, and a scale-down removes the kind in surplus first.
"""

from __future__ import annotations

from pydantic import BaseModel

from skyhop.contract.serve import ReplicaRecord, ReplicaStatus, UpdateMode

__all__ = ["ReplicaPlan", "plan_replicas", "update_done"]


class ReplicaPlan(BaseModel):
    launch: int
    """New replicas of the current version to launch."""
    remove: list[int]
    """Replica ids to shut down."""
    launch_ondemand: int = 0
    """Of ``launch``, how many run on-demand (the rest on spot), when ``ondemand`` was given."""
    hold: list[int] = []
    """READY replicas the load balancer must not be sent yet (a blue-green set before the switch)."""


def _live(record: ReplicaRecord) -> bool:
    return not record.status.failed and record.status != ReplicaStatus.SHUTTING_DOWN


def _ready(record: ReplicaRecord) -> bool:
    return record.status == ReplicaStatus.READY


def plan_replicas(
    replicas: list[ReplicaRecord],
    version: int,
    target: int,
    ceiling: int,
    mode: UpdateMode = UpdateMode.ROLLING,
    ondemand: int | None = None,
    surge: int = 1,
) -> ReplicaPlan:
    target = min(target, ceiling)
    live = [r for r in replicas if _live(r)]
    current = [r for r in live if r.version == version]
    old = [r for r in live if r.version != version]
    remove: list[int] = []
    extra = len(current) - target
    ondemand_surplus = ondemand is not None and sum(not r.use_spot for r in current) > ondemand
    if extra > 0:
        # The kind in surplus first, then not READY, then the newest: the longest-serving stay.
        going = sorted(current, key=lambda r: (r.use_spot == ondemand_surplus, _ready(r), -r.replica_id))[
            :extra
        ]
        remove += [r.replica_id for r in going]
        current = [r for r in current if r not in going]
    ready_current = sum(_ready(r) for r in current)
    old_ready = [r for r in old if _ready(r)]
    remove += [r.replica_id for r in old if not _ready(r)]
    leaving = len(replicas) - len(live)
    hold: list[int] = []
    if mode is UpdateMode.BLUE_GREEN and old_ready and ceiling - leaving - len(old_ready) >= target:
        hold = [r.replica_id for r in current if _ready(r)]
        if ready_current >= target:  # the switch: every old replica at once
            remove += [r.replica_id for r in old_ready]
            old_ready, hold = [], []
        room = ceiling - leaving - len(current) - len(old_ready)
        launch = min(max(0, target - len(current)), max(0, room))
    else:
        needed = max(0, target - ready_current)
        if len(old_ready) > needed:
            remove += [r.replica_id for r in old_ready[: len(old_ready) - needed]]  # the oldest first
            old_ready = old_ready[len(old_ready) - needed :]
        room = ceiling - leaving - len(current) - len(old_ready)
        if old_ready and room <= 0 and not leaving and ready_current == len(current) < target:
            remove.append(old_ready.pop(0).replica_id)  # no room: the oldest makes way for one new one
            room += 1
        launch = min(max(0, target - len(current)), max(0, room))
        if old_ready:
            launch = min(launch, max(0, target + surge - len(current) - len(old_ready)))
    lacking = 0 if ondemand is None else max(0, ondemand - sum(not r.use_spot for r in current))
    return ReplicaPlan(launch=launch, launch_ondemand=min(launch, lacking), remove=remove, hold=hold)


def update_done(replicas: list[ReplicaRecord], version: int, target: int) -> bool:
    """An update is done once ``target`` replicas of ``version`` are READY and no older one is live."""
    live = [r for r in replicas if _live(r)]
    return all(r.version == version for r in live) and sum(_ready(r) for r in live) >= target
