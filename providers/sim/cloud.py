"""The sim cloud's API: instances in a JSON file under ``~/.skyhop/sim/``, shared by every process.

Workers, the CLI and tests all see the same cloud, so a worker killed in the middle of a call
and its replacement agree on what exists, and a test can count instances the way it would
through a real cloud's API. Calls are serialised by an ``flock``; each one first applies due
preemptions, then consults the fault plan. A node is a folder under ``nodes/<instance id>`` where
the ``local`` runtime runs real processes; stopping, terminating or preempting an instance kills
them.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from skyhop.providers.home import skyhop_home
from skyhop.providers.runtime import node_runner
from skyhop.providers.sim.plan import FaultPlan, load_plan

__all__ = ["SimCloud", "sim_root"]


def sim_root() -> Path:
    """The sim cloud's folder: its plan, its state and its nodes."""
    return skyhop_home() / "sim"


class SimCloud:
    """One simulated cloud; ``root`` holds ``plan.yaml``, ``state.json`` and ``nodes/``."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root or sim_root()

    @property
    def plan_path(self) -> Path:
        return self.root / "plan.yaml"

    def plan(self) -> FaultPlan:
        """The current fault plan (re-read on every call, so tests and benchmarks can change it)."""
        return load_plan(self.plan_path)

    def node_dir(self, instance_id: str) -> Path:
        """The folder a node's runtime lives in."""
        return self.root / "nodes" / instance_id

    @contextlib.contextmanager
    def _state(self, plan: FaultPlan) -> Iterator[dict[str, Any]]:
        """The locked state, written back even when the call raises (its effects happened)."""
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / "lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            path = self.root / "state.json"
            try:
                state: dict[str, Any] = json.loads(path.read_text())
            except (OSError, ValueError):
                state = {"instances": {}, "next_id": 1, "counters": {}, "plan": "", "api_seconds": 0.0}
            if state["plan"] != plan.digest:
                state["plan"], state["counters"] = plan.digest, {}
            self._preempt_due(state)
            try:
                yield state
            finally:
                tmp = path.with_suffix(f".{os.getpid()}.tmp")
                tmp.write_text(json.dumps(state))
                os.replace(tmp, path)

    @contextlib.contextmanager
    def _call(self) -> Iterator[tuple[FaultPlan, dict[str, Any]]]:
        """One API call: the provider's own latency, then the state; its duration is accounted."""
        started = time.monotonic()
        plan = self.plan()
        if plan.latency_s:
            time.sleep(plan.latency_s)
        with self._state(plan) as state:
            try:
                yield plan, state
            finally:
                state["api_seconds"] += time.monotonic() - started

    def run_instances(
        self,
        cluster: str,
        ranks: list[int],
        region: str | None,
        zone: str | None,
        instance_type: str,
        spot: bool,
    ) -> int:
        """Create the ranks that do not exist yet in ``zone``; returns how many it created.

        A matching fault rule raises its error, after creating ``after_nodes`` of the ranks.
        """
        with self._call() as (plan, state):
            rule_index, rule = next(
                (
                    (i, r)
                    for i, r in enumerate(plan.faults)
                    if r.error is not None
                    and r.call == "run_instances"
                    and r.matches(region, zone, instance_type)
                    and (r.attempts is None or state["counters"].get(str(i), 0) < r.attempts)
                ),
                (None, None),
            )
            if rule is not None:
                state["counters"][str(rule_index)] = state["counters"].get(str(rule_index), 0) + 1
            preempt = next(
                (
                    r.preempt_after_s
                    for r in plan.faults
                    if r.preempt_after_s is not None and r.matches(region, zone, instance_type)
                ),
                None,
            )
            live = {
                (i["cluster"], i["rank"], i["zone"])
                for i in state["instances"].values()
                if i["state"] != "terminated"
            }
            allowed = ranks if rule is None else ranks[: rule.after_nodes]
            created = 0
            for rank in allowed:
                if (cluster, rank, zone) in live:
                    continue
                instance_id = f"sim-{state['next_id']:08d}"
                state["next_id"] += 1
                now = time.time()
                state["instances"][instance_id] = {
                    "instance_id": instance_id,
                    "cluster": cluster,
                    "rank": rank,
                    "region": region,
                    "zone": zone,
                    "instance_type": instance_type,
                    "spot": spot,
                    "state": "running",
                    "launched_at": now,
                    "preempt_at": None if preempt is None else now + preempt,
                }
                created += 1
            if rule is not None:
                error = rule.fault(f"{instance_type} in {zone or region}: simulated {rule.error} failure")
                error.leftover = created > 0
                raise error
            return created

    def describe(self, cluster: str | None = None, region: str | None = None) -> list[dict[str, Any]]:
        """Instances that are not terminated, optionally of one cluster and region.

        A ``call: describe`` rule matching the region fails the call instead (the API is down).
        """
        with self._call() as (plan, state):
            for index, rule in enumerate(plan.faults):
                counter = str(index)
                if (
                    rule.error is not None
                    and rule.call == "describe"
                    and rule.region in (None, region)
                    and (rule.attempts is None or state["counters"].get(counter, 0) < rule.attempts)
                ):
                    state["counters"][counter] = state["counters"].get(counter, 0) + 1
                    raise rule.fault(
                        f"describing instances in {region or 'every region'}: simulated {rule.error} failure"
                    )
            return [
                dict(i)
                for i in state["instances"].values()
                if i["state"] != "terminated"
                and (cluster is None or i["cluster"] == cluster)
                and (region is None or i["region"] == region)
            ]

    def terminate(self, instance_ids: list[str]) -> None:
        """Terminate instances: their processes are killed and their folders removed."""
        self._transition(instance_ids, "terminated")

    def stop(self, instance_ids: list[str]) -> None:
        """Stop instances: their processes are killed, their folders (disks) kept."""
        self._transition(instance_ids, "stopped")

    def start(self, instance_ids: list[str]) -> None:
        """Start stopped instances (a preemption deadline counts again from now)."""
        with self._call() as (_, state):
            for instance_id in instance_ids:
                item = state["instances"].get(instance_id)
                if item is not None and item["state"] == "stopped":
                    if item["preempt_at"] is not None:
                        item["preempt_at"] = time.time() + (item["preempt_at"] - item["launched_at"])
                    item["state"], item["launched_at"] = "running", time.time()

    def api_seconds(self) -> float:
        """Total time spent inside this cloud's API calls, simulated latency included."""
        with self._state(self.plan()) as state:
            return float(state["api_seconds"])

    def preempted(self, instance_ids: list[str]) -> set[str]:
        """Which of these instances the fault plan preempted (rather than a terminate call)."""
        with self._call() as (_, state):
            return {i for i in instance_ids if state["instances"].get(i, {}).get("preempted")}

    def _transition(self, instance_ids: list[str], target: str) -> None:
        with self._call() as (_, state):
            for instance_id in instance_ids:
                item = state["instances"].get(instance_id)
                if item is not None and item["state"] != "terminated":
                    self._halt(item, target)

    def _preempt_due(self, state: dict[str, Any]) -> None:
        now = time.time()
        for item in state["instances"].values():
            if item["state"] == "running" and item["preempt_at"] is not None and item["preempt_at"] <= now:
                self._halt(item, "terminated")
                item["preempted"] = True

    def _halt(self, item: dict[str, Any], target: str) -> None:
        folder = self.node_dir(item["instance_id"])
        if target == "terminated" and folder.exists():
            # A removed machine reports nothing more: its folder goes first, so no one reads the
            # states its dying jobs would write (a killed job is not a job that failed).
            gone = folder.with_name(f"{folder.name}.terminated")
            folder.rename(gone)
            folder = gone
        jobs = folder / "jobs"
        for key in sorted(p.name for p in jobs.iterdir()) if jobs.is_dir() else []:
            node_runner.cancel(str(folder), key, grace_s=0.0)
        if target == "terminated":
            shutil.rmtree(folder, ignore_errors=True)
        item["state"] = target
