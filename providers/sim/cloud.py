"""The sim cloud's API: instances in JSON files under ``~/.skyhop/sim/``, shared by every process.

Workers, the CLI and tests all see the same cloud, so a worker killed in the middle of a call
and its replacement agree on what exists, and a test can count instances the way it would
through a real cloud's API. Each cluster's instances are one file (``clusters/<name>.json``)
under its own ``flock``, ``instances/<id>`` names an instance's cluster, and ``cloud.json`` holds
what is cloud-wide (the fault plan's attempt counters, the next instance id, the time spent in
calls) under a lock held only for those few reads and writes: a call costs what it touches, not
what the cloud holds (at 10,000 instances in one file every call took 70-130 ms, one at a time).
A call first applies the due preemptions of the clusters it touches, then consults the fault
plan. A node is a folder under ``nodes/<instance id>`` where the ``local`` runtime runs real
processes; stopping, terminating or preempting an instance kills them.

A preemption comes at its time with no call at all, as a cloud reclaims a spot VM: arming one
starts a detached timer (``sleep``, then ``python -m skyhop.providers.sim.timer``) in a process
group of its own, recorded on the instance. When it fires it preempts under its cluster's lock
and ends; stopping or terminating the instance first kills its group, so no timer outlives its
instance. Any call on its cluster still applies a due preemption itself, so a killed timer only
delays one.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
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
from urllib.parse import quote, unquote

from skyhop.providers.home import skyhop_home
from skyhop.providers.runtime import node_runner
from skyhop.providers.runtime.mounts import unmount_under
from skyhop.providers.sim import network

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
    """One simulated cloud; ``root`` holds ``plan.yaml``, the state files and ``nodes/``."""

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

    def _cluster_path(self, cluster: str) -> Path:
        return self.root / "clusters" / f"{quote(cluster, safe='-_')}.json"

    def netns(self, instance_id: str) -> str:
        """The network namespace of an instance when the plan has a ``network``: unique to this
        cloud's folder, so two clouds on one machine (two tests' homes) never share one."""
        tag = hashlib.sha1(str(self.root.resolve()).encode()).hexdigest()[:6]
        return f"skyhop-{tag}-{instance_id}"

    def _owner_path(self, instance_id: str) -> Path:
        return self.root / "instances" / instance_id

    @contextlib.contextmanager
    def _cloud(self, plan: FaultPlan) -> Iterator[dict[str, Any]]:
        """The cloud-wide part of the state, locked: fault counters, the next instance id, the
        time spent in calls. Held only for a few reads and writes, never across a node's work."""
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / "cloud.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            path = self.root / "cloud.json"
            try:
                state: dict[str, Any] = json.loads(path.read_text())
            except (OSError, ValueError):
                state = {"next_id": 1, "counters": {}, "plan": "", "api_seconds": 0.0}
            if state["plan"] != plan.digest:
                state["plan"], state["counters"] = plan.digest, {}
            try:
                yield state
            finally:
                _write_json(path, state)

    @contextlib.contextmanager
    def _cluster(self, cluster: str) -> Iterator[dict[str, dict[str, Any]]]:
        """The cluster's instances by id, locked, due preemptions applied; written back (if they
        changed) even when the call raises (its effects happened). A call touching several
        clusters takes them one at a time, so no two calls wait on each other crosswise."""
        path = self._cluster_path(cluster)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                read = path.read_text()
            except FileNotFoundError:
                read = json.dumps({})
            instances: dict[str, dict[str, Any]] = json.loads(read)
            try:
                self._preempt_due(instances)
                yield instances
            finally:
                if json.dumps(instances) != read:
                    _write_json(path, instances)

    def _each(self, instance_ids: list[str]) -> Iterator[dict[str, Any]]:
        """Each of ``instance_ids`` that exists, under its cluster's lock, one cluster at a time."""
        wanted = set(instance_ids)
        for cluster in sorted(self._owners(instance_ids)):
            with self._cluster(cluster) as instances:
                yield from (item for instance_id, item in instances.items() if instance_id in wanted)

    def _owner(self, instance_id: str) -> str | None:
        """The cluster of an instance (it never changes), None for an unknown id."""
        if not (instance_id.startswith("sim-") and instance_id[4:].isdigit()):
            return None  # not an id this cloud makes: never a path to read
        try:
            return self._owner_path(instance_id).read_text()
        except FileNotFoundError:
            return None

    def _owners(self, instance_ids: list[str]) -> set[str]:
        return {c for c in map(self._owner, instance_ids) if c is not None}

    def _all_clusters(self) -> set[str]:
        folder = self.root / "clusters"
        names = [p.stem for p in folder.glob("*.json")] if folder.is_dir() else []
        return {unquote(name) for name in names}

    @contextlib.contextmanager
    def _call(self) -> Iterator[FaultPlan]:
        """One API call: the provider's own latency, then the call; its duration is accounted.

        Only with a latency: without one, the duration is the sim's own bookkeeping, and accounting
        it (a lock and a write of the cloud's file shared by every call) held thousands of managed
        jobs' calls up behind each other."""
        started = time.monotonic()
        plan = self.plan()
        if plan.latency_s:
            time.sleep(plan.latency_s)
        try:
            yield plan
        finally:
            if plan.latency_s:
                with self._cloud(plan) as cloud:
                    cloud["api_seconds"] += time.monotonic() - started

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
        with self._call() as plan, self._cluster(cluster) as instances:
            subnet = None if plan.network is None else _subnet(plan.network.bridge)
            live = {(i["rank"], i["zone"]) for i in instances.values() if i["state"] != "terminated"}
            with self._cloud(plan) as cloud:
                counters = cloud["counters"]
                rule_index, rule = next(
                    (
                        (i, r)
                        for i, r in enumerate(plan.faults)
                        if r.error is not None
                        and r.call == "run_instances"
                        and r.matches(region, zone, instance_type)
                        and (r.attempts is None or counters.get(str(i), 0) < r.attempts)
                    ),
                    (None, None),
                )
                if rule is not None:
                    counters[str(rule_index)] = counters.get(str(rule_index), 0) + 1
                allowed = ranks if rule is None else ranks[: rule.after_nodes]
                new_ranks = [rank for rank in allowed if (rank, zone) not in live]
                preempt_after = _preemptions(plan, counters, region, zone, instance_type, new_ranks)
                first_id = cloud["next_id"]
                cloud["next_id"] += len(new_ranks)
            for offset, rank in enumerate(new_ranks):
                instance_id = f"sim-{first_id + offset:08d}"
                _write_text(self._owner_path(instance_id), cluster)
                now = time.time()
                after = preempt_after.get(rank)
                item = instances[instance_id] = {
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
                if plan.network is not None and subnet is not None:
                    self._cable(item, first_id + offset, plan.network.bridge, *subnet)
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
        with self._call() as plan:
            rules = [
                (index, rule)
                for index, rule in enumerate(plan.faults)
                if rule.error is not None and rule.call == "describe" and rule.region in (None, region)
            ]
            if rules:
                with self._cloud(plan) as cloud:
                    counters = cloud["counters"]
                    for index, rule in rules:
                        counter = str(index)
                        if rule.attempts is None or counters.get(counter, 0) < rule.attempts:
                            counters[counter] = counters.get(counter, 0) + 1
                            raise rule.fault(
                                f"describing instances in {region or 'every region'}: "
                                f"simulated {rule.error} failure"
                            )
            found = []
            for name in [cluster] if cluster is not None else sorted(self._all_clusters()):
                with self._cluster(name) as instances:
                    found += [
                        dict(i)
                        for i in instances.values()
                        if i["state"] != "terminated" and (region is None or i["region"] == region)
                    ]
            return found

    def terminate(self, instance_ids: list[str]) -> None:
        """Terminate instances: their processes are killed and their folders removed."""
        self._transition(instance_ids, "terminated")

    def stop(self, instance_ids: list[str]) -> None:
        """Stop instances: their processes are killed, their folders (disks) kept."""
        self._transition(instance_ids, "stopped")

    def start(self, instance_ids: list[str]) -> None:
        """Start stopped instances (a preemption deadline counts again from now)."""
        with self._call():
            for item in self._each(instance_ids):
                if item["state"] == "stopped":
                    if item["preempt_at"] is not None:
                        item["preempt_at"] = time.time() + (item["preempt_at"] - item["launched_at"])
                    item["state"], item["launched_at"] = "running", time.time()
                    self._arm(item)

    def schedule_preemption(self, instance_ids: list[str], after_s: float) -> None:
        """Preempt these running instances ``after_s`` from now, as the plan's rules do (for tests
        and benchmarks that choose their victims once the jobs run)."""
        with self._call():
            for item in self._each(instance_ids):
                if item["state"] == "running":
                    self._disarm(item)
                    item["preempt_at"] = time.time() + after_s
                    self._arm(item)

    def preempt(self, instance_ids: list[str]) -> None:
        """Preempt these running instances now, in this process: a benchmark's way, so the machine
        it measures does not also start a timer's Python for each preemption, as a cloud's own
        preemptions cost its control plane nothing (``schedule_preemption`` is the fault plan's way)."""
        with self._call():
            for item in self._each(instance_ids):
                if item["state"] == "running":
                    self._preempt(item)

    def fire(self, instance_id: str) -> None:
        """A timer's end: apply the instance's preemption once it is due, unless it was re-armed
        (another timer now owns it) or is gone."""
        cluster = self._owner(instance_id)
        if cluster is None:
            return  # the whole cloud is gone (a test's home removed): nothing to preempt
        while True:
            with self._cluster(cluster) as instances:
                item = instances.get(instance_id)
                if item is None or item.get("timer") != os.getpgrp():
                    return
                wait = item["preempt_at"] - time.time()
                if wait <= 0:
                    item["timer"] = None
                    self._preempt_due(instances)
                    return
            time.sleep(wait)  # woken early (the clock moved): wait out the rest, unlocked

    def api_seconds(self) -> float:
        """Total time spent inside this cloud's API calls, simulated latency included (0 for a plan
        without latency: ``_call``)."""
        with self._cloud(self.plan()) as cloud:
            return float(cloud["api_seconds"])

    def preempted(self, instance_ids: list[str]) -> set[str]:
        """Which of these instances the fault plan preempted (rather than a terminate call)."""
        with self._call():
            return set(self.preempted_at(instance_ids))

    def preempted_at(self, instance_ids: list[str]) -> dict[str, float]:
        """When (epoch seconds) each of these instances that was preempted had its processes killed.

        The observer's view for tests and benchmarks, not an API call: no simulated latency.
        """
        return {
            item["instance_id"]: float(item["preempted_at"])
            for item in self._each(instance_ids)
            if item.get("preempted")
        }

    def up_clusters(self, names: set[str]) -> set[str]:
        """Which of these clusters still have an instance that is not terminated.

        The observer's view for tests and benchmarks, not an API call: no simulated latency, no
        fault, no lock (a cluster's file is replaced whole), and only the named clusters read
        (``describe`` locks and reads every one).
        """
        up = set()
        for name in names:
            try:
                instances: dict[str, dict[str, Any]] = json.loads(self._cluster_path(name).read_text())
            except FileNotFoundError:
                continue
            if any(item["state"] != "terminated" for item in instances.values()):
                up.add(name)
        return up

    def _transition(self, instance_ids: list[str], target: str) -> None:
        with self._call():
            for item in self._each(instance_ids):
                if item["state"] != "terminated":
                    self._halt(item, target)

    def _preempt_due(self, instances: dict[str, dict[str, Any]]) -> None:
        now = time.time()
        for item in instances.values():
            if item["state"] == "running" and item["preempt_at"] is not None and item["preempt_at"] <= now:
                self._preempt(item)

    def _preempt(self, item: dict[str, Any]) -> None:
        """Take the running instance away, its processes killed, as a preemption (``preempted``,
        ``preempted_at``: the moment the killing began)."""
        now = time.time()
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

    def _cable(self, item: dict[str, Any], number: int, bridge: str, prefix: str, gateway: str) -> None:
        """Give a new instance its namespace and address (``.10`` to ``.249``, by instance number)."""
        netns = item["netns"] = self.netns(item["instance_id"])
        item["address"] = address = f"{prefix}.{10 + (number - 1) % 240}"
        veth, peer = network.veth_names(netns)
        try:
            network.cable(netns, bridge, address, gateway, veth, peer)
        except subprocess.CalledProcessError as exc:
            network.unplug(netns, veth)
            item["netns"] = None  # a node without its network is not one the plan asked for
            self._halt(item, "terminated")
            from skyhop.providers.sim.plan import PlanError

            raise PlanError(f"network: cabling {netns} to {bridge}: {exc.stderr.strip()}") from None

    def _halt(self, item: dict[str, Any], target: str) -> None:
        self._disarm(item)
        folder = self.node_dir(item["instance_id"])
        if target == "terminated" and folder.exists():
            unmount_under(folder)  # its mounted buckets stay intact (``runtime.mounts``)
            # A removed machine reports nothing more: its folder goes first, so no one reads the
            # states its dying jobs would write (a killed job is not a job that failed).
            gone = folder.with_name(f"{folder.name}.terminated")
            folder.rename(gone)
            folder = gone
        jobs = folder / "jobs"
        for key in sorted(p.name for p in jobs.iterdir()) if jobs.is_dir() else []:
            node_runner.cancel(str(folder), key, grace_s=0.0)
        netns = item.get("netns")
        if netns is not None and target == "terminated":
            network.unplug(netns, network.veth_names(netns)[0])
        elif netns is not None:
            network.kill_all(netns)  # a stopped machine keeps its address, not its processes
        if target == "terminated":
            shutil.rmtree(folder, ignore_errors=True)
        item["state"] = target


def _subnet(bridge: str) -> tuple[str, str]:
    try:
        return network.bridge_subnet(bridge)
    except ValueError as exc:
        from skyhop.providers.sim.plan import PlanError

        raise PlanError(f"network: {exc}") from None


def _write_text(path: Path, text: str) -> None:
    """Atomically: a reader sees the old file or the new one, never a part."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _write_json(path: Path, data: dict[str, Any]) -> None:
    _write_text(path, json.dumps(data))


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
