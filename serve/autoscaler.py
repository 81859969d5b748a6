"""How many replicas a service should run: a pure function of the load balancer's request counts.

SkyServe's semantics (``replica_policy``): the target is ``ceil(qps / target_qps_per_replica)``
clipped to ``[min_replicas, max_replicas]`` (``min_replicas`` when there is no
``target_qps_per_replica``). A higher target takes effect only once every decision for
``upscale_delay_seconds`` wanted more, a lower one once every decision for
``downscale_delay_seconds`` wanted less; a decision that wants the current count, or the other
way, starts the wait again. So steady load never flaps, and a dip shorter than the delay changes
nothing. From zero replicas, the first request scales up at once (the load balancer is holding it).

Spot: ``base_ondemand_fallback_replicas`` of the target always run on-demand; with
``dynamic_ondemand_fallback``, each spot replica that is not READY is covered by an on-demand one
until it is (SkyServe's ``FallbackRequestRateAutoscaler``). The covers are not counted against
``max_replicas`` here: they stand in for replicas that serve nothing (the controller still never
runs more than ``max_replicas`` replicas, so they take only the room below it).

The controller keeps ``AutoscalerState`` in its workflow state and calls ``decide`` on a timer
with the counts it read from the load balancer; the function reads no clock, so it is safe in a
workflow and in replays.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, Field, model_validator

__all__ = [
    "AutoscalerInput",
    "AutoscalerPolicy",
    "AutoscalerState",
    "Decision",
    "ReplicaTarget",
    "decide",
    "replica_kinds",
]


class AutoscalerPolicy(BaseModel):
    """The spec's ``replica_policy`` (``replicas: N`` is ``min_replicas = max_replicas = N``)."""

    min_replicas: int = Field(ge=0)
    max_replicas: int | None = Field(default=None, ge=0)
    """Default: ``min_replicas`` (a fixed count)."""
    target_qps_per_replica: float | None = Field(default=None, gt=0)
    """Default: none, the count stays at ``min_replicas``."""
    upscale_delay_seconds: float = Field(default=300, ge=0)
    """Default 300 s, as SkyServe."""
    downscale_delay_seconds: float = Field(default=1200, ge=0)
    """Default 1200 s, as SkyServe."""
    base_ondemand_fallback_replicas: int = Field(default=0, ge=0)
    dynamic_ondemand_fallback: bool = False

    @model_validator(mode="after")
    def _bounds(self) -> AutoscalerPolicy:
        if self.max_replicas is not None and self.max_replicas < self.min_replicas:
            raise ValueError(
                f"max_replicas ({self.max_replicas}) cannot be less than min_replicas ({self.min_replicas})"
            )
        return self

    @property
    def ceiling(self) -> int:
        """``max_replicas``, or ``min_replicas`` without it (SkyServe's default)."""
        return self.min_replicas if self.max_replicas is None else self.max_replicas


class AutoscalerState(BaseModel):
    """What ``decide`` remembers between calls (kept in the controller's workflow state)."""

    target: int
    """Replicas the service should run now."""
    wanted: int | None = None
    """The count the decisions since ``wanted_since`` asked for, all on the same side of ``target``."""
    wanted_since: float | None = None
    """When the decisions started asking for a change (workflow time, seconds)."""

    @classmethod
    def initial(cls, policy: AutoscalerPolicy) -> AutoscalerState:
        return cls(target=policy.min_replicas)


class AutoscalerInput(BaseModel):
    """One decision's facts."""

    now: float
    """Workflow time, seconds (``workflow.time()``)."""
    window_requests: int = Field(ge=0)
    """Requests the load balancer saw in the window (``LoadBalancerStats.window_requests``)."""
    window_seconds: float = Field(gt=0)
    ready_spot: int = Field(default=0, ge=0)
    """Spot replicas READY now (for ``dynamic_ondemand_fallback``)."""
    use_spot: bool = False
    """Whether the service's replicas ask for spot."""


class ReplicaTarget(BaseModel):
    """How many replicas of each kind to run."""

    spot: int
    ondemand: int

    @property
    def total(self) -> int:
        return self.spot + self.ondemand


class Decision(BaseModel):
    state: AutoscalerState
    replicas: ReplicaTarget


def _wanted(policy: AutoscalerPolicy, facts: AutoscalerInput) -> int:
    if policy.target_qps_per_replica is None:
        # A fixed count; from zero, one replica once anyone asks (max_replicas permitting).
        fixed = policy.min_replicas or int(facts.window_requests > 0)
        return min(policy.ceiling, fixed)
    qps = facts.window_requests / facts.window_seconds
    # A hair of float slack: 2.0000000001 requests' worth is 2 replicas, not 3.
    needed = math.ceil(qps / policy.target_qps_per_replica - 1e-9)
    return max(policy.min_replicas, min(policy.ceiling, needed))


def _next_state(policy: AutoscalerPolicy, state: AutoscalerState, facts: AutoscalerInput) -> AutoscalerState:
    wanted = _wanted(policy, facts)
    if wanted == state.target:
        return AutoscalerState(target=state.target)
    if state.target == 0:  # a request is waiting for a replica: no delay
        return AutoscalerState(target=wanted)
    up = wanted > state.target
    same_side = state.wanted is not None and (state.wanted > state.target) == up
    since = state.wanted_since if same_side and state.wanted_since is not None else facts.now
    # Over the wait, go only as far as every decision agreed: the smallest rise, the smallest fall.
    agreed = wanted if not same_side or state.wanted is None else (min if up else max)(wanted, state.wanted)
    delay = policy.upscale_delay_seconds if up else policy.downscale_delay_seconds
    if facts.now - since >= delay:
        return AutoscalerState(target=agreed)
    return AutoscalerState(target=state.target, wanted=agreed, wanted_since=since)


def decide(policy: AutoscalerPolicy, state: AutoscalerState, facts: AutoscalerInput) -> Decision:
    """The next state, and the replicas (spot and on-demand) to run."""
    state = _next_state(policy, state, facts)
    return Decision(
        state=state, replicas=replica_kinds(policy, state.target, facts.use_spot, facts.ready_spot)
    )


def replica_kinds(policy: AutoscalerPolicy, target: int, use_spot: bool, ready_spot: int) -> ReplicaTarget:
    """``target`` replicas as spot and on-demand ones (all on-demand when the task asks no spot)."""
    if not use_spot:
        return ReplicaTarget(spot=0, ondemand=target)
    base = min(policy.base_ondemand_fallback_replicas, target)
    spot = target - base
    cover = max(0, spot - ready_spot) if policy.dynamic_ondemand_fallback else 0
    return ReplicaTarget(spot=spot, ondemand=base + cover)
