"""Catalog offerings -> the cheapest (or fastest) launchable choice for a task or a DAG of tasks."""

from skyhop.optimizer.blocklist import Blocked, Blocklist
from skyhop.optimizer.dag_plan import DagPlan, optimize_dag
from skyhop.optimizer.errors import NoFeasibleOfferingError
from skyhop.optimizer.fit import mismatch
from skyhop.optimizer.plan import Candidate, Minimize, Plan, optimize

__all__ = [
    "Blocked",
    "Blocklist",
    "Candidate",
    "DagPlan",
    "Minimize",
    "NoFeasibleOfferingError",
    "Plan",
    "mismatch",
    "optimize",
    "optimize_dag",
]
