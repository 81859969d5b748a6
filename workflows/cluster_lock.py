"""A cluster's lock: who holds it, who waits, who gets it next, and what happens to a dead holder.

Plain state over ``ClusterRecord.holder`` and ``.waiting`` (so it is carried over a continue-as-new
and shown by the ``status`` query); ``ClusterWorkflow`` does the signalling. The rules:

- Launches queue first come, first served; a claim from a launch already queued changes nothing,
  and one from the holder is answered with the grant again (a launch reset to before its grant
  waits for it once more).
- The cluster's own operations (stop, start, down, autostop) go before any waiting launch: a
  ``down`` must not wait behind launches that came after the one it cancelled.
- A launch gives the lock back, or its place in the queue, with one ``release``; for a launch
  that ended without one (terminated, timed out), its lease sends it (``workflows.lock_lease``).
"""

from __future__ import annotations

from enum import StrEnum

from skyhop.contract import HolderKind, Operation
from skyhop.contract.clusters import ClusterRecord, LockHolder

__all__ = ["Claimed", "ClusterLock", "Released"]


class Claimed(StrEnum):
    """What a claim did."""

    QUEUED = "queued"
    ALREADY_QUEUED = "already queued"
    HOLDS = "holds"
    """The claimant holds the lock already: send it the grant again."""


class Released(StrEnum):
    """What a release did."""

    LOCK = "lock"
    """The holder gave the lock back."""
    PLACE = "place"
    """A waiting launch left the queue."""
    NOTHING = "nothing"


class ClusterLock:
    def __init__(self, record: ClusterRecord, *, operations_first: bool = True) -> None:
        self._record = record
        self.operations_first = operations_first
        """Whether an operation waiting for the lock goes before waiting launches (clusters whose
        run began before this rule keep the old order, so that their histories replay)."""
        self._operations_waiting = 0

    @property
    def holder(self) -> LockHolder | None:
        return self._record.holder

    @property
    def free(self) -> bool:
        return self._record.holder is None

    @property
    def busy(self) -> bool:
        """Someone holds the lock or waits for it (the cluster is not idle)."""
        return self._record.holder is not None or bool(self._record.waiting)

    @property
    def operation(self) -> Operation | None:
        """The cluster's own operation holding the lock, if one does."""
        holder = self._record.holder
        return Operation(holder.id) if holder is not None and holder.kind == HolderKind.OPERATION else None

    def claim(self, launch: LockHolder) -> Claimed:
        """Queue ``launch`` for the lock."""
        if launch == self._record.holder:
            return Claimed.HOLDS
        if launch in self._record.waiting:
            return Claimed.ALREADY_QUEUED
        self._record.waiting.append(launch)
        return Claimed.QUEUED

    def release(self, launch: LockHolder) -> Released:
        """``launch`` gives the lock back, or its place in the queue; it ended, or gave up."""
        if launch == self._record.holder:
            self._record.holder = None
            return Released.LOCK
        if launch in self._record.waiting:
            self._record.waiting.remove(launch)
            return Released.PLACE
        return Released.NOTHING

    @property
    def grantable(self) -> bool:
        """A waiting launch can have the lock now: it is free and no operation wants it first."""
        operation_first = self.operations_first and self._operations_waiting > 0
        return self.free and bool(self._record.waiting) and not operation_first

    def grant_next(self) -> LockHolder:
        """Hand the lock to the first waiting launch (call when ``grantable``)."""
        launch = self._record.waiting.pop(0)
        self._record.holder = launch
        return launch

    def want(self) -> None:
        """One of the cluster's operations waits for the lock: launches wait behind it."""
        self._operations_waiting += 1

    def take(self, operation: Operation) -> None:
        """The operation that wanted the lock holds it (call once ``free``)."""
        self._operations_waiting -= 1
        self._record.holder = LockHolder.operation(operation)

    def give_up(self) -> None:
        """An operation that wanted the lock no longer does (its update was cancelled)."""
        self._operations_waiting -= 1

    def unlock(self) -> None:
        """The operation holding the lock is done."""
        self._record.holder = None

    def launches(self) -> list[LockHolder]:
        """Every launch holding or waiting for the lock, holder first (``down`` cancels them all)."""
        holder = self._record.holder
        head = [holder] if holder is not None and holder.kind == HolderKind.LAUNCH else []
        return [*head, *self._record.waiting]

    def pop_waiting(self) -> LockHolder | None:
        """The next waiting launch, removed from the queue (to be told the cluster is gone)."""
        return self._record.waiting.pop(0) if self._record.waiting else None
