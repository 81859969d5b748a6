"""The ``sim`` provider: a simulated cloud with a real catalog and a fault plan, for tests and benchmarks."""

from skyhop.providers.sim.cloud import SimCloud, sim_root
from skyhop.providers.sim.plan import FaultPlan, FaultRule, PlanError, load_plan
from skyhop.providers.sim.provider import SimProvider

__all__ = [
    "FaultPlan",
    "FaultRule",
    "PlanError",
    "SimCloud",
    "SimProvider",
    "load_plan",
    "sim_root",
]
