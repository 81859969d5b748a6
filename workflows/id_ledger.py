"""Handing out managed-job ids: short, sequential, and the same again for a retried request.

Plain code (no Temporal), so ``ManagedJobIdsWorkflow`` stays a thin wrapper and the rules are
unit-tested directly. What it remembers is bounded: the last id and the latest requests' answers.
"""

from __future__ import annotations

from skyhop.contract.job_index import AllocatedIds, AllocateIds, ManagedJobIdsInput

__all__ = ["KEEP_RECENT", "IdLedger"]

KEEP_RECENT = 1_000
"""Requests whose answers are remembered. A submit retries within seconds, so the latest thousand
cover every retry in flight, and the state a continue-as-new carries stays a few tens of KB."""


class IdLedger:
    """The counter and the recent answers; ``carried`` is what the next run starts from."""

    def __init__(self, state: ManagedJobIdsInput, keep: int = KEEP_RECENT) -> None:
        self.last = state.last
        self.recent = dict(state.recent)
        self.keep = keep

    def allocate(self, request: AllocateIds) -> AllocatedIds:
        """The next ``count`` ids, or what ``request.request_id`` was given before."""
        known = self.recent.get(request.request_id)
        if known is not None:
            return known
        given = AllocatedIds(first=self.last + 1, count=request.count)
        self.last += request.count
        self.recent[request.request_id] = given
        while len(self.recent) > self.keep:
            del self.recent[next(iter(self.recent))]  # the oldest answer: dicts keep insertion order
        return given

    def carried(self, history_limit: int | None) -> ManagedJobIdsInput:
        return ManagedJobIdsInput(last=self.last, recent=self.recent, history_limit=history_limit)
