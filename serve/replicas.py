"""The READY replicas, which one takes the next request, and what each has been sent.

Every request sent to a replica goes through ``ReplicaSet.sending``, a context manager that counts
it in flight and always counts it out, whatever ends it (a reset, a timeout, a client gone, a
cancel): SkyServe's counters leak on error paths and then send all traffic to one replica.

A replica that refuses connections (its process died) cools down: ``pick`` passes it over for a
while, doubling from 1 s, until it accepts one again or a new set is pushed. Without that, least
load would favour it: a refused request leaves at once, so the dead replica always looks idlest
and takes thousands of doomed first attempts in the seconds before its readiness probe fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from skyhop.contract.serve import LoadBalancerStats, LoadBalancingPolicy, ReplicaEndpoint, ReplicaLoad

__all__ = ["Replica", "ReplicaSet", "RequestWindow"]

_IDLE_CONNECTIONS = 64
"""Keep-alive connections kept open per replica for the next requests."""
_FIRST_COOLDOWN = 1.0
"""Seconds a replica is passed over after its first refused connection; each refusal in a row
doubles it, up to ``_LONGEST_COOLDOWN`` (the readiness probe takes a dead replica out well before)."""
_LONGEST_COOLDOWN = 30.0


class RequestWindow:
    """Requests counted in one-second buckets over the last ``seconds`` seconds (a ring)."""

    def __init__(self, seconds: int) -> None:
        self.seconds = seconds
        self._buckets = [0] * seconds
        self._stamps = [-1] * seconds

    def add(self, now: float) -> None:
        second = int(now)
        slot = second % self.seconds
        if self._stamps[slot] != second:
            self._stamps[slot], self._buckets[slot] = second, 0
        self._buckets[slot] += 1

    def count(self, now: float) -> int:
        oldest = int(now) - self.seconds
        return sum(n for n, stamp in zip(self._buckets, self._stamps, strict=True) if stamp > oldest)


Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class Replica:
    """One replica: its address, its counters and its idle keep-alive connections."""

    def __init__(self, endpoint: ReplicaEndpoint, window_seconds: int) -> None:
        self.endpoint = endpoint
        self.in_flight = 0
        self.total = 0
        self.failed = 0
        self.window = RequestWindow(window_seconds)
        self.idle: list[Connection] = []
        self.retired = False
        self.cooldown = 0.0
        """The last cooldown in seconds (0: it accepted its last connection)."""
        self.cool_until = 0.0
        """``time.monotonic()`` until which ``pick`` passes it over."""

    def take_idle(self) -> Connection | None:
        while self.idle:
            reader, writer = self.idle.pop()
            if not writer.is_closing() and not reader.at_eof():
                return reader, writer
            writer.close()
        return None

    def give_back(self, connection: Connection) -> None:
        """Keep a connection whose last response ended cleanly, unless the replica left the set."""
        if self.retired or len(self.idle) >= _IDLE_CONNECTIONS:
            connection[1].close()
        else:
            self.idle.append(connection)

    def retire(self) -> None:
        self.retired = True
        for _, writer in self.idle:
            writer.close()
        self.idle.clear()

    def load(self, now: float) -> ReplicaLoad:
        return ReplicaLoad(
            replica_id=self.endpoint.replica_id,
            in_flight=self.in_flight,
            total=self.total,
            failed=self.failed,
            window_requests=self.window.count(now),
            cooling=max(self.cool_until - now, 0.0),
        )


class _Sending:
    """``ReplicaSet.sending``'s context manager: a class, not ``@contextmanager``, as it runs for
    every request and a generator-based one costs a generator and two extra frames each time."""

    __slots__ = ("_replica",)

    def __init__(self, replica: Replica) -> None:
        self._replica = replica

    def __enter__(self) -> None:
        replica = self._replica
        replica.in_flight += 1
        replica.total += 1
        replica.window.add(time.monotonic())

    def __exit__(self, *exc: object) -> None:
        self._replica.in_flight -= 1


class ReplicaSet:
    """The READY set as last pushed, and the policy that picks from it."""

    def __init__(self, policy: LoadBalancingPolicy, window_seconds: int = 60) -> None:
        self.policy = policy
        self.window_seconds = window_seconds
        self.replicas: list[Replica] = []
        self.generation = 0
        self.held = 0
        self.demand = RequestWindow(window_seconds)
        self._next = 0
        self._changed = asyncio.Event()
        self._cooling = False
        """Whether any replica has a cooldown (so ``pick`` looks at the clock only then)."""

    def refused(self, replica: Replica) -> None:
        """``replica``'s connection was refused, reset or timed out before a byte was sent."""
        replica.cooldown = min(replica.cooldown * 2 or _FIRST_COOLDOWN, _LONGEST_COOLDOWN)
        replica.cool_until = time.monotonic() + replica.cooldown
        self._cooling = True

    def accepted(self, replica: Replica) -> None:
        """``replica`` took a connection: it is tried as any other again."""
        if replica.cooldown:
            replica.cooldown = replica.cool_until = 0.0
            self._cooling = any(r.cooldown for r in self.replicas)

    def replace(self, endpoints: list[ReplicaEndpoint]) -> None:
        """Take a new READY set: kept replicas keep their counters and connections."""
        by_id = {replica.endpoint.replica_id: replica for replica in self.replicas}
        replicas = []
        for endpoint in endpoints:
            kept = by_id.pop(endpoint.replica_id, None)
            if kept is not None and kept.endpoint != endpoint:
                kept.retire()
                kept = None
            if kept is not None:  # the controller probed it READY since: trust that over a refusal
                kept.cooldown = kept.cool_until = 0.0
            replicas.append(kept or Replica(endpoint, self.window_seconds))
        for gone in by_id.values():
            gone.retire()
        self.replicas = replicas
        self._cooling = False
        self.generation += 1
        self._next = 0
        self._changed.set()
        self._changed = asyncio.Event()

    def pick(self, exclude: set[int]) -> Replica | None:
        """The replica for the next attempt, never one in ``exclude`` (those already tried), and not
        one cooling down unless only such are left (a refusal may be over; a 502 surely is not)."""
        candidates = (
            [r for r in self.replicas if r.endpoint.replica_id not in exclude] if exclude else self.replicas
        )
        if self._cooling:
            now = time.monotonic()
            warm = [r for r in candidates if r.cool_until <= now]
            candidates = warm or candidates
        if not candidates:
            return None
        start = self._next % len(candidates)
        self._next += 1
        if self.policy is LoadBalancingPolicy.ROUND_ROBIN:
            best = candidates[start]
        else:
            best = self._least_loaded(candidates, start)
        if best.cool_until:  # a trial of a refusing replica: the requests after it wait for its outcome
            best.cool_until = time.monotonic() + best.cooldown
        return best

    @staticmethod
    def _least_loaded(candidates: list[Replica], start: int) -> Replica:
        # Least load, ties broken by rotating the starting point.
        count = len(candidates)
        best = candidates[start]
        for offset in range(1, count):
            replica = candidates[(start + offset) % count]
            if replica.in_flight < best.in_flight:
                best = replica
        return best

    async def wait_for_replicas(self, timeout: float) -> bool:
        """Hold a request while the set is empty (scale from zero): True once a replica is READY."""
        deadline = time.monotonic() + timeout
        self.held += 1
        try:
            while not self.replicas:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), left)
            return True
        finally:
            self.held -= 1

    def sending(self, replica: Replica) -> _Sending:
        """Count one request in flight to ``replica`` for as long as the ``with`` block runs."""
        return _Sending(replica)

    def stats(self) -> LoadBalancerStats:
        now = time.monotonic()
        return LoadBalancerStats(
            window_seconds=self.window_seconds,
            window_requests=self.demand.count(now),
            held=self.held,
            replicas=[replica.load(now) for replica in self.replicas],
            generation=self.generation,
        )
