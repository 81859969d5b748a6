"""Latency of the sim cloud's API calls at 100 and 10,000 instances: the cloud of a git revision
(default: before its state was split by cluster) next to this tree's, side by side in one run.

For each size and each way, a fresh cloud (its own folder, an empty fault plan, no simulated
latency) gets its instances through ``run_instances`` (clusters of 100 nodes), then ``--reps``
times a one-node cluster goes through the calls a managed job's life makes: ``run_instances``,
``describe(cluster, region)``, ``preempted``, ``schedule_preemption`` (which starts a timer) and
``terminate``. Printed: the median milliseconds of each call.

    python benchmarks/sim_api.py [--sizes 100 10000] [--reps 20] [--before 44ce667]
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO.parent))  # skyhop, for a checkout not installed

from skyhop.providers.sim.cloud import SimCloud  # noqa: E402

_REGION, _ZONE, _TYPE = "us-east-1", "us-east-1a", "m6i.large"
_CALLS = ["run_instances", "describe", "preempted", "schedule_preemption", "terminate"]


def _module_at(revision: str, path: str, name: str, folder: Path) -> ModuleType:
    """``path`` of the repository as it was at ``revision``, imported as module ``name``."""
    source = subprocess.run(
        ["git", "-C", str(REPO), "show", f"{revision}:{path}"], capture_output=True, check=True
    ).stdout
    file = folder / f"{name}.py"
    file.write_bytes(source)
    spec = importlib.util.spec_from_file_location(name, file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _cloud_before(revision: str, folder: Path) -> type[Any]:
    """The revision's ``SimCloud``, reading its plan with the revision's plan code."""
    plan = _module_at(revision, "providers/sim/plan.py", "sim_plan_before", folder)
    cloud = _module_at(revision, "providers/sim/cloud.py", "sim_cloud_before", folder)

    class Before(cloud.SimCloud):  # type: ignore[misc,name-defined]
        def plan(self) -> Any:
            return plan.load_plan(self.plan_path)

    return Before


def _ms(call: Callable[..., object], *args: Any) -> float:
    started = time.perf_counter()
    call(*args)
    return (time.perf_counter() - started) * 1000


def _measure(cloud: Any, size: int, reps: int) -> dict[str, float]:
    cloud.root.mkdir(parents=True)
    cloud.plan_path.write_text("faults: []\n")
    for start in range(0, size, 100):
        ranks = list(range(min(100, size - start)))
        cloud.run_instances(f"bg-{start}", ranks, _REGION, _ZONE, _TYPE, False)
    times: dict[str, list[float]] = {call: [] for call in _CALLS}
    for rep in range(reps):
        name = f"probe-{rep}"
        times["run_instances"].append(_ms(cloud.run_instances, name, [0], _REGION, _ZONE, _TYPE, True))
        ids = [item["instance_id"] for item in cloud.describe(name, _REGION)]
        times["describe"].append(_ms(cloud.describe, name, _REGION))
        times["preempted"].append(_ms(cloud.preempted, ids))
        times["schedule_preemption"].append(_ms(cloud.schedule_preemption, ids, 3600.0))
        times["terminate"].append(_ms(cloud.terminate, ids))
    return {call: statistics.median(values) for call, values in times.items()}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 10_000])
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--before", default="44ce667", help="git revision of the cloud to compare with")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        before = _cloud_before(args.before, Path(tmp))
        ways: dict[str, type[Any]] = {f"before ({args.before})": before, "after (this tree)": SimCloud}
        print(f"median ms per call, {args.reps} calls each ({'instances':>9} = instances in the cloud)")
        print(f"{'':20}{'instances':>10}" + "".join(f"{call:>21}" for call in _CALLS))
        for size in args.sizes:
            for name, cloud_type in ways.items():
                root = Path(tmp) / f"{size}-{len(name)}"
                figures = _measure(cloud_type(root), size, args.reps)
                print(
                    f"{name:20}{size:>10}" + "".join(f"{figures[call]:>21.2f}" for call in _CALLS), flush=True
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
