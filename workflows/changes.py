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
    def __init__(self, baseline: str) -> None:
        """Must run in the run's first workflow task (its ``workflow.init``), before any other patch."""
        self.baseline = workflow.patched(baseline)
        """Whether the run has the baseline: every listed change, and what came with the baseline."""

    def has(self, patch_id: str) -> bool:
        """Whether the run has the change ``patch_id`` (one made before the baseline)."""
        return self.baseline or workflow.patched(patch_id)
