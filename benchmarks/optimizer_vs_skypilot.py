#!/usr/bin/env python3
"""skyhop's optimizer against SkyPilot's, side by side, on the same catalog data.

For every task YAML in a folder, SkyPilot's real optimizer runs in its own venv (through
``../shared/peers/skypilot/sky_optimize.py``, which times only ``Optimizer.optimize``) and
skyhop's runs in this process, both on SkyPilot's v8 CSVs (``SKYHOP_CATALOG_DIR``). Printed per
task: both choices, whether they agree (same provider, instance type and region, or the same
price), both optimize times; then the agreement rate, the median time ratio, and a cold
``skyhop launch --dryrun`` of a one-task YAML as a user would run it.

Both times are measured the same way: the median of ``--repeat`` optimize calls in one process,
the first with the catalogs not yet in memory (skyhop then reads its on-disk parsed cache;
SkyPilot its CSVs). skyhop's first, cold, call is printed too.

    /work/venv/bin/python benchmarks/optimizer_vs_skypilot.py [benchmarks/tasks] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"


def skypilot(task: Path, args: argparse.Namespace) -> dict[str, Any]:
    """SkyPilot's choice and optimize time (median of its repetitions), from its own process."""
    command = [args.skypilot_python, str(args.sky_optimize), str(task), "--clouds", args.clouds]
    command += ["--repeat", str(args.repeat), "--minimize", args.minimize]
    env = dict(os.environ, SKYPILOT_DISABLE_USAGE_COLLECTION="1")
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    try:
        result: dict[str, Any] = json.loads(done.stdout)
    except ValueError:
        return {
            "error": (done.stderr.strip().splitlines() or ["no output"])[-1],
            "seconds": None,
            "tasks": [],
        }
    seconds = statistics.median(result["optimize_wall_s_all"])
    tasks = [
        {
            "provider": str(t["cloud"]).lower(),
            "region": t["region"],
            "zone": t["zone"],
            "instance_type": t["instance_type"],
            "accelerators": t["accelerators"],
            "use_spot": t["use_spot"],
            "hourly": t["hourly_cost_total"],
        }
        for t in result.get("tasks", [])
    ]
    return {"error": result.get("error"), "seconds": seconds, "tasks": tasks}


def skyhop(task: Path, args: argparse.Namespace) -> dict[str, Any]:
    """skyhop's choice and optimize time (median), in this process."""
    from skyhop.optimizer import NoFeasibleOfferingError, optimize_dag
    from skyhop.providers.catalog import cache, load_catalogs
    from skyhop.spec import load_dag

    times, plan, error = [], None, None
    cache._memory.clear()  # the first call reads the parsed catalogs, as a fresh process would
    for _ in range(args.repeat):
        dag = load_dag(str(task))
        start = time.perf_counter()
        try:
            plan = optimize_dag(dag, load_catalogs(), minimize=args.minimize)
        except NoFeasibleOfferingError as exc:
            error = str(exc)
        times.append(time.perf_counter() - start)
    tasks = []
    for p in plan.plans if plan else []:
        c = p.chosen
        tasks.append(
            {
                "provider": c.provider,
                "region": c.region,
                "zone": c.zone,
                "instance_type": c.instance_type,
                "accelerators": c.accelerators,
                "use_spot": p.use_spot,
                "hourly": p.hourly_cost,
            }
        )
    return {"error": error, "seconds": statistics.median(times), "cold": times[0], "tasks": tasks}


def agree(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Same provider, instance type and region, or the same price."""
    if a["error"] or b["error"]:
        return bool(a["error"]) and bool(b["error"])
    if len(a["tasks"]) != len(b["tasks"]):
        return False
    for x, y in zip(a["tasks"], b["tasks"], strict=True):
        same_place = (x["provider"], x["instance_type"], x["region"]) == (
            y["provider"],
            y["instance_type"],
            y["region"],
        )
        same_price = abs(x["hourly"] - y["hourly"]) <= 1e-4 * max(1.0, x["hourly"])
        if not (same_place or same_price):
            return False
    return True


def priced_by_skyhop(task: Path, result: dict[str, Any]) -> float:
    """$ of a placement under skyhop's cost model: node prices for the runtime plus data movement."""
    from skyhop.optimizer.egress import egress
    from skyhop.spec import load_dag

    dag = load_dag(str(task))
    nodes = result["tasks"]
    total: float = sum(
        t["hourly"] * n.hours_on(t["accelerators"] or {}) for t, n in zip(nodes, dag.tasks, strict=True)
    )
    for u, v in dag.edges:
        a, b = nodes[u], nodes[v]
        total += egress(a["provider"], a["region"], b["provider"], b["region"], dag.tasks[u].outputs_gb)[0]
    return total


def describe(result: dict[str, Any]) -> str:
    if result["error"]:
        return "infeasible"
    return " -> ".join(
        f"{t['provider']} {t['region']}/{t['zone'] or '-'} {t['instance_type']}"
        + ("[spot]" if t["use_spot"] else "")
        + f" ${t['hourly']:.4f}"
        for t in result["tasks"]
    )


def cold_dryrun(task: Path, catalog: Path) -> float:
    """Seconds for ``skyhop launch --dryrun TASK`` in a fresh process (parsed-catalog cache warm on disk)."""
    skyhop_bin = Path(sys.executable).parent / "skyhop"
    env = dict(os.environ, SKYHOP_CATALOG_DIR=str(catalog))
    start = time.perf_counter()
    subprocess.run(
        [str(skyhop_bin), "launch", "--dryrun", str(task)], capture_output=True, env=env, check=True
    )
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("folder", nargs="?", default=str(REPO / "benchmarks" / "tasks"))
    parser.add_argument("--catalog", default=str(SHARED / "catalogs" / "skypilot-v8"))
    parser.add_argument("--clouds", default="gcp,azure")
    parser.add_argument("--minimize", choices=["cost", "time"], default="cost")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skypilot-python", default="/tmp/peer-skypilot/bin/python")
    parser.add_argument("--sky-optimize", default=str(SHARED / "peers" / "skypilot" / "sky_optimize.py"))
    args = parser.parse_args()
    os.environ["SKYHOP_CATALOG_DIR"] = args.catalog
    sys.path.insert(0, str(REPO))

    tasks = sorted(Path(args.folder).glob("*.yaml"))
    agreed, ratios, cold_ratios, skyhop_ms, cold_ms = 0, [], [], [], []
    for task in tasks:
        theirs, ours = skypilot(task, args), skyhop(task, args)
        same = agree(ours, theirs)
        agreed += same
        ratio = theirs["seconds"] / ours["seconds"] if theirs["seconds"] and ours["seconds"] else None
        if ratio:
            ratios.append(ratio)
            cold_ratios.append(theirs["seconds"] / ours["cold"])
        skyhop_ms.append(ours["seconds"] * 1000)
        cold_ms.append(ours["cold"] * 1000)
        print(f"{task.name}: {'AGREE' if same else 'DISAGREE'}")
        print(f"  skypilot {theirs['seconds'] or 0:7.3f} s  {describe(theirs)}")
        print(f"  skyhop   {ours['seconds']:7.3f} s  {describe(ours)}  (cold {ours['cold'] * 1000:.0f} ms)")
        if ratio:
            print(f"  skyhop is {ratio:.0f}x faster")
        if not same and not ours["error"] and not theirs["error"]:
            their_cost, our_cost = priced_by_skyhop(task, theirs), priced_by_skyhop(task, ours)
            if our_cost < their_cost:
                print(
                    "  why: in skyhop's cost model (inter-region egress is charged; SkyPilot charges only "
                    f"egress between clouds) SkyPilot's plan costs ${their_cost:.4f}, "
                    f"skyhop's ${our_cost:.4f}"
                )
            else:
                print(f"  UNEXPLAINED: SkyPilot's plan costs ${their_cost:.4f}, skyhop's ${our_cost:.4f}")
        sys.stdout.flush()

    one_task = next(t for t in tasks if "---" not in t.read_text())
    cold = [cold_dryrun(one_task, Path(args.catalog)) for _ in range(3)]
    print()
    print(f"tasks: {len(tasks)}  agreement: {agreed}/{len(tasks)} = {100 * agreed / len(tasks):.0f}%")
    print(f"median time ratio (skypilot / skyhop, medians of their calls): {statistics.median(ratios):.0f}x")
    print(f"median time ratio against skyhop's cold call: {statistics.median(cold_ratios):.0f}x")
    print(f"skyhop optimize: median {statistics.median(skyhop_ms):.1f} ms, max {max(skyhop_ms):.1f} ms")
    cold_line = f"median {statistics.median(cold_ms):.1f} ms, max {max(cold_ms):.1f} ms"
    print(f"skyhop optimize, cold (catalogs not in memory): {cold_line}")
    print(f"skyhop launch --dryrun {one_task.name}, fresh process: median {statistics.median(cold):.2f} s")
    return 0 if agreed == len(tasks) else 1


if __name__ == "__main__":
    sys.exit(main())
