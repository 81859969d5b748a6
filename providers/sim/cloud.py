"""The sim cloud's API: instances in a JSON file under ``~/.skyhop/sim/``, shared by every process.

Workers, the CLI and tests all see the same cloud, so a worker killed in the middle of a call
and its replacement agree on what exists, and a test can count instances the way it would
through a real cloud's API. Calls are serialised by an ``flock``; each one first applies due
preemptions, then consults the fault plan. A node is a folder under ``nodes/<instance id>`` where
the ``local`` runtime runs real processes; stopping, terminating or preempting an instance kills
them.

A preemption comes at its time with no call at all, as a cloud reclaims a spot VM: arming one
starts a detached timer (``sleep``, then ``python -m skyhop.providers.sim.timer``) in a process
group of its own, recorded on the instance. When it fires it preempts under the lock and ends;
stopping or terminating the instance first kills its group, so no timer outlives its instance.
Any call still applies a due preemption itself, so a killed timer only delays one.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skyhop.providers.home import skyhop_home
from skyhop.providers.runtime import node_runner

if TYPE_CHECKING:
    from skyhop.providers.sim.plan import FaultPlan

__all__ = ["SimCloud", "sim_root"]

_TIMER_SCRIPT = 'sleep "$1" && exec "$2" -m skyhop.providers.sim.timer "$3" "$4" &'
"""Started in a new session: the shell backgrounds the timer and exits at once, so the timer is no
one's child (never a zombie of a long-lived worker) and its group, whose id is the shell's pid,
holds only the timer's processes. A shell ``sleep`` rather than Python keeps a waiting timer at a megabyte."""


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
        from skyhop.providers.sim.plan import load_plan  # pydantic: not in a firing timer's imports

        return load_plan(self.plan_path)

    def node_dir(self, instance_id: str) -> Path:
        """The folder a node's runtime lives in."""
        return self.root / "nodes" / instance_id

    @contextlib.contextmanager
    def _state(self, plan: FaultPlan | None) -> Iterator[dict[str, Any]]:
        """The locked state, written back even when the call raises (its effects happened).

        ``plan`` None: a timer's access, which must not depend on the plan file being valid.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / "lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            path = self.root / "state.json"
            try:
                state: dict[str, Any] = json.loads(path.read_text())
            except (OSError, ValueError):
                state = {"instances": {}, "next_id": 1, "counters": {}, "plan": "", "api_seconds": 0.0}
            if plan is not None and state["plan"] != plan.digest:
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
            live = {
                (i["cluster"], i["rank"], i["zone"])
                for i in state["instances"].values()
                if i["state"] != "terminated"
            }
            allowed = ranks if rule is None else ranks[: rule.after_nodes]
            new_ranks = [rank for rank in allowed if (cluster, rank, zone) not in live]
            preempt_after = _preemptions(plan, state["counters"], region, zone, instance_type, new_ranks)
            for rank in new_ranks:
                instance_id = f"sim-{state['next_id']:08d}"
                state["next_id"] += 1
                now = time.time()
                after = preempt_after.get(rank)
                item = state["instances"][instance_id] = {
                    "instance_id": instance_id,
                    "cluster": cluster,
                    "rank": rank,
                    "region": region,
                    "zone": zone,
                    "instance_type": instance_type,
                    "spot": spot,
                    "state": "running",
                    "launched_at": now,
                    "preempt_at": None if after is None else now + after,
                    "timer": None,
                }
                self._arm(item)
            created = len(new_ranks)
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
                    self._arm(item)

    def schedule_preemption(self, instance_ids: list[str], after_s: float) -> None:
        """Preempt these running instances ``after_s`` from now, as the plan's rules do (for tests
        and benchmarks that choose their victims once the jobs run)."""
        with self._call() as (_, state):
            for instance_id in instance_ids:
                item = state["instances"].get(instance_id)
                if item is not None and item["state"] == "running":
                    self._disarm(item)
                    item["preempt_at"] = time.time() + after_s
                    self._arm(item)

    def fire(self, instance_id: str) -> None:
        """A timer's end: apply the instance's preemption once it is due, unless it was re-armed
        (another timer now owns it) or is gone."""
        if not (self.root / "state.json").exists():
            return  # the whole cloud is gone (a test's home removed): nothing to preempt
        while True:
            with self._state(None) as state:
                item = state["instances"].get(instance_id)
                if item is None or item.get("timer") != os.getpgrp():
                    return
                wait = item["preempt_at"] - time.time()
                if wait <= 0:
                    item["timer"] = None
                    self._preempt_due(state)
                    return
            time.sleep(wait)  # woken early (the clock moved): wait out the rest, unlocked

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
                item["preempted"], item["preempted_at"] = True, now

    def _arm(self, item: dict[str, Any]) -> None:
        """Start the timer of a running instance that has a preemption deadline."""
        if item["preempt_at"] is None:
            return
        delay = max(0.0, item["preempt_at"] - time.time())
        shell = subprocess.Popen(
            [
                "/bin/sh",
                "-c",
                _TIMER_SCRIPT,
                "sim-timer",
                f"{delay:.3f}",
                sys.executable,
                str(self.root),
                item["instance_id"],
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        shell.wait()
        item["timer"] = shell.pid

    def _disarm(self, item: dict[str, Any]) -> None:
        """Kill the instance's timer, unless this process is it (it is firing)."""
        pgid = item.get("timer")
        item["timer"] = None
        if pgid is not None and pgid != os.getpgrp():
            # A group id is not reused while any member lives; a timer lives until it fires,
            # and a fired timer clears its id first, so this never reaches a stranger's group.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)

    def _halt(self, item: dict[str, Any], target: str) -> None:
        self._disarm(item)
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


def _preemptions(
    plan: FaultPlan,
    counters: dict[str, int],
    region: str | None,
    zone: str | None,
    instance_type: str,
    ranks: list[int],
) -> dict[int, float]:
    """Seconds until preemption of each of ``ranks`` a launch creates, counting the launch for
    every preemption rule that selects one of them (``launches`` picks which count)."""
    after: dict[int, float] = {}
    for index, rule in enumerate(plan.faults):
        selected = [rank for rank in ranks if rule.selects(rank)]
        if not selected or not rule.matches(region, zone, instance_type):
            continue
        key = f"launches:{index}"
        counters[key] = launch = counters.get(key, 0) + 1
        if rule.launches is None or launch in rule.launches:
            assert rule.preempt_after_s is not None
            for rank in selected:
                after.setdefault(rank, rule.preempt_after_s)
    return after
