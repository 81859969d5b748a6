"""The ``sim`` provider: a simulated cloud with a real catalog and a fault plan, for tests and benchmarks."""

from providers.sim.cloud import SimCloud, sim_root
from providers.sim.plan import FaultPlan, FaultRule, PlanError, load_plan
from providers.sim.provider import SimProvider

__all__ = [
    "FaultPlan",
    "FaultRule",
    "PlanError",
    "SimCloud",
    "SimProvider",
    "load_plan",
    "sim_root",
]
