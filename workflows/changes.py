"""``Changes``: which of a workflow's changes (``workflow.patched`` ids) a run has, asked once.

Every patch a run records is a marker and, from the SDK's core, an upsert of the
``TemporalChangeVersion`` search attribute: a visibility write, the dev server's costliest. A patch
is recorded where the run first asks it, so a managed job's cancel asked three and wrote three of
them, on the path that has to be quick at 10,000 jobs. A *baseline* patch, asked once in the run's
first workflow task, stands for every change made before it: a run that recorded it was run by code
that had them all, and so is every replay of it. A run without its marker (a history from older
code) asks each change where it always did.
"""

from __future__ import annotations

from temporalio import workflow

__all__ = ["Changes"]


class Changes:
    def __init__(self, *baselines: str, carried: str | None = None) -> None:
        """``baselines``, oldest first: each stands for every change made before it (and the one
        before it). Must run in the run's first workflow task (its ``workflow.init``), before any
        other patch; only the newest baseline is recorded by a new run.

        ``carried``: the baseline the run that continued as new into this one had (from this run's
        input, so every replay of it decides the same). A run that carries a baseline has it
        without asking, so its history has no marker, and no visibility write, of its own: a
        managed job continues as new at every launch and relaunch."""
        self._ids = baselines
        had = baselines.index(carried) + 1 if carried in baselines else 0
        self.level = had
        """How many of ``baselines`` the run has (the oldest that many)."""
        for level in range(len(baselines), had, -1):
            if workflow.patched(baselines[level - 1]):
                self.level = level
                break
        self.baseline = self.level > 0
        """Whether the run has the first baseline: every listed change, and what came with it."""

    def carry(self) -> str | None:
        """What the next run (continue-as-new) carries: the newest baseline the run has, if any."""
        return self._ids[self.level - 1] if self.level else None

    def since(self, baseline: str) -> bool:
        """Whether the run has ``baseline`` (one of its baselines), or a later one."""
        return self.level > self._ids.index(baseline)

    def has(self, patch_id: str) -> bool:
        """Whether the run has the change ``patch_id`` (one made before the first baseline)."""
        return self.baseline or workflow.patched(patch_id)
