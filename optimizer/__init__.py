"""Catalog offerings -> the cheapest launchable choice for a task."""

from optimizer.errors import NoFeasibleOfferingError
from optimizer.fit import mismatch
from optimizer.plan import Plan, optimize

__all__ = ["NoFeasibleOfferingError", "Plan", "mismatch", "optimize"]
