"""The ``sim`` provider: a simulated cloud with a real catalog and a fault plan, for tests and benchmarks.

Names load on first use: a preemption timer (``providers.sim.timer``) imports only the cloud's
state file code, so firing one costs a bare interpreter's start, not the provider stack's.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

_MODULES = {
    "FaultPlan": "plan",
    "FaultRule": "plan",
    "PlanError": "plan",
    "SimCloud": "cloud",
    "SimProvider": "provider",
    "load_plan": "plan",
    "sim_root": "cloud",
}


def __getattr__(name: str) -> Any:
    if name not in _MODULES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_MODULES[name]}"), name)
