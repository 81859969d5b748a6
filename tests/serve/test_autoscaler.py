"""The autoscaler's policy (``serve/autoscaler.py``): SkyServe's semantics, without its flapping."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from skyhop.serve.autoscaler import AutoscalerInput, AutoscalerPolicy, AutoscalerState, Decision, decide

WINDOW = 60.0


def qps_input(now: float, qps: float, **extra: object) -> AutoscalerInput:
    return AutoscalerInput(now=now, window_requests=round(qps * WINDOW), window_seconds=WINDOW, **extra)  # type: ignore[arg-type]


def run(policy: AutoscalerPolicy, loads: list[tuple[float, float]], every: float = 20.0) -> list[int]:
    """Targets after each decision, one every ``every`` seconds, for (duration, qps) phases."""
    state = AutoscalerState.initial(policy)
    targets = []
    now = 0.0
    for duration, qps in loads:
        end = now + duration
        while now < end:
            state = decide(policy, state, qps_input(now, qps)).state
            targets.append(state.target)
            now += every
    return targets


POLICY = AutoscalerPolicy(
    min_replicas=1,
    max_replicas=5,
    target_qps_per_replica=2,
    upscale_delay_seconds=60,
    downscale_delay_seconds=120,
)


def test_the_target_is_qps_over_the_target_per_replica_rounded_up_and_clipped() -> None:
    fast = POLICY.model_copy(update={"upscale_delay_seconds": 0, "downscale_delay_seconds": 0})
    for qps, expected in [(0, 1), (0.5, 1), (2, 1), (2.1, 2), (4, 2), (7.9, 4), (10, 5), (1000, 5)]:
        state = AutoscalerState(target=3)
        assert decide(fast, state, qps_input(0, qps)).state.target == expected, qps


def test_scale_up_waits_for_the_upscale_delay_of_agreeing_decisions() -> None:
    targets = run(POLICY, [(100, 1), (200, 7)])  # 5 decisions at 1 qps, then 10 at 7 qps (wants 4)
    assert targets[:5] == [1] * 5
    # The 7-qps decisions start at t=100; the one at t=160 is 60 s later.
    assert targets[5:8] == [1, 1, 1]
    assert targets[8:] == [4] * 7


def test_scale_down_waits_for_the_downscale_delay_and_takes_the_smallest_fall() -> None:
    state = AutoscalerState(target=5)
    state = decide(POLICY, state, qps_input(0, 2)).state  # wants 1
    assert state.target == 5
    state = decide(POLICY, state, qps_input(60, 5)).state  # wants 3: still a fall
    assert state.target == 5
    state = decide(POLICY, state, qps_input(120, 2)).state  # 120 s of falls: the least of them
    assert state.target == 3


def test_steady_load_on_a_boundary_never_flaps() -> None:
    # 3.9 .. 4.1 qps: 2 or 3 replicas wanted, alternately, for an hour.
    wobble = [(20, 3.9 if i % 2 else 4.1) for i in range(180)]
    targets = run(POLICY.model_copy(update={"upscale_delay_seconds": 30}), [(20, 3.9), *wobble])
    assert targets[3:] == [2] * len(targets[3:]), f"the target moved under steady load: {targets}"


def test_a_dip_shorter_than_the_downscale_delay_changes_nothing() -> None:
    targets = run(POLICY.model_copy(update={"upscale_delay_seconds": 0}), [(60, 8), (100, 0), (200, 8)])
    assert set(targets) == {4}, targets


def test_a_change_of_direction_restarts_the_wait() -> None:
    state = AutoscalerState(target=2)
    state = decide(POLICY, state, qps_input(0, 8)).state  # up, wants 4
    state = decide(POLICY, state, qps_input(50, 0)).state  # down: the rise's wait is gone
    state = decide(POLICY, state, qps_input(70, 8)).state  # up again from t=70
    assert state.target == 2
    assert decide(POLICY, state, qps_input(129, 8)).state.target == 2
    assert decide(POLICY, state, qps_input(130, 8)).state.target == 4


def test_never_above_max_nor_below_min() -> None:
    targets = run(
        POLICY.model_copy(update={"upscale_delay_seconds": 0, "downscale_delay_seconds": 0}),
        [(200, 1e6), (200, 0)],
    )
    assert max(targets) == 5
    assert min(targets) == 1


def test_min_zero_scales_to_zero_and_back_at_once_on_the_first_request() -> None:
    policy = AutoscalerPolicy(
        min_replicas=0, max_replicas=3, target_qps_per_replica=1, downscale_delay_seconds=60
    )
    state = AutoscalerState(target=1)
    state = decide(policy, state, qps_input(0, 0)).state
    assert state.target == 1
    state = decide(policy, state, qps_input(60, 0)).state
    assert state.target == 0
    # One request in the window: up without waiting for upscale_delay_seconds (300 s by default).
    state = decide(policy, state, AutoscalerInput(now=61, window_requests=1, window_seconds=WINDOW)).state
    assert state.target == 1


def test_min_zero_without_target_qps_serves_the_first_request() -> None:
    policy = AutoscalerPolicy(min_replicas=0, max_replicas=1)
    state = AutoscalerState.initial(policy)
    assert state.target == 0
    assert (
        decide(policy, state, AutoscalerInput(now=0, window_requests=0, window_seconds=WINDOW)).state.target
        == 0
    )
    assert (
        decide(policy, state, AutoscalerInput(now=0, window_requests=1, window_seconds=WINDOW)).state.target
        == 1
    )


def test_a_fixed_count_stays_put_whatever_the_load() -> None:
    policy = AutoscalerPolicy(min_replicas=3)
    assert set(run(policy, [(600, 0), (600, 1e6)])) == {3}


def spot(policy: AutoscalerPolicy, target: int, ready_spot: int) -> Decision:
    return decide(
        policy, AutoscalerState(target=target), qps_input(0, target * 2, use_spot=True, ready_spot=ready_spot)
    )


def test_base_ondemand_fallback_replicas_always_run_on_demand() -> None:
    policy = POLICY.model_copy(update={"base_ondemand_fallback_replicas": 1})
    assert spot(policy, 3, ready_spot=0).replicas.model_dump() == {"spot": 2, "ondemand": 1}
    assert spot(policy, 3, ready_spot=2).replicas.model_dump() == {"spot": 2, "ondemand": 1}


def test_dynamic_fallback_covers_each_spot_replica_that_is_not_ready() -> None:
    policy = POLICY.model_copy(
        update={"base_ondemand_fallback_replicas": 1, "dynamic_ondemand_fallback": True}
    )
    assert spot(policy, 4, ready_spot=0).replicas.model_dump() == {"spot": 3, "ondemand": 4}
    assert spot(policy, 4, ready_spot=2).replicas.model_dump() == {"spot": 3, "ondemand": 2}
    assert spot(policy, 4, ready_spot=3).replicas.model_dump() == {"spot": 3, "ondemand": 1}


def test_without_spot_every_replica_is_on_demand() -> None:
    decision = decide(POLICY, AutoscalerState(target=2), qps_input(0, 4))
    assert decision.replicas.model_dump() == {"spot": 0, "ondemand": 2}


def test_max_below_min_is_refused_with_both_values() -> None:
    with pytest.raises(ValidationError, match=r"max_replicas \(1\) cannot be less than min_replicas \(2\)"):
        AutoscalerPolicy(min_replicas=2, max_replicas=1)


def test_the_state_survives_a_json_round_trip() -> None:
    """It lives in workflow state: what comes back from history decides the same."""
    state = decide(POLICY, AutoscalerState(target=1), qps_input(0, 8)).state
    again = AutoscalerState.model_validate_json(state.model_dump_json())
    assert decide(POLICY, again, qps_input(60, 8)) == decide(POLICY, state, qps_input(60, 8))
