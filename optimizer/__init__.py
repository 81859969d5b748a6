"""Catalog offerings -> the cheapest (or fastest) launchable choice for a task or a DAG of tasks."""

from optimizer.blocklist import Blocked, Blocklist
from optimizer.dag_plan import DagPlan, optimize_dag
from optimizer.errors import NoFeasibleOfferingError
from optimizer.fit import mismatch
from optimizer.plan import Candidate, Minimize, Plan, optimize

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
