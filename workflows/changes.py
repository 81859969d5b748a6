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
    def __init__(self, baseline: str, *, carried: str | None = None) -> None:
        """Must run in the run's first workflow task (its ``workflow.init``), before any other patch.

        ``carried``: the baseline the run that continued as new into this one had (from this run's
        input, so every replay of it decides the same). A run that carries this baseline has it
        without asking, so its history has no marker, and no visibility write, of its own: a
        managed job continues as new at every launch and relaunch."""
        self._id = baseline
        self.baseline = carried == baseline or workflow.patched(baseline)
        """Whether the run has the baseline: every listed change, and what came with the baseline."""

    def carry(self) -> str | None:
        """What the next run (continue-as-new) carries: this baseline, if the run has it."""
        return self._id if self.baseline else None

    def has(self, patch_id: str) -> bool:
        """Whether the run has the change ``patch_id`` (one made before the baseline)."""
        return self.baseline or workflow.patched(patch_id)
