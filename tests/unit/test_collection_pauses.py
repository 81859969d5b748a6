"""The worker logs a garbage collection long enough to stall it (``worker.CollectionPauses``)."""

from __future__ import annotations

import gc
import logging

import pytest

from skyhop.worker import GC_PAUSE_LOGGED_S, CollectionPauses


def test_a_long_collection_is_logged_with_its_generation_and_a_short_one_is_not(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [100.0]
    pauses = CollectionPauses(clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="skyhop.worker"):
        pauses("start", {"generation": 0, "collected": 0, "uncollectable": 0})
        now[0] += GC_PAUSE_LOGGED_S / 10
        pauses("stop", {"generation": 0, "collected": 12, "uncollectable": 0})
        assert caplog.messages == []
        pauses("start", {"generation": 2, "collected": 0, "uncollectable": 0})
        now[0] += 2.4
        pauses("stop", {"generation": 2, "collected": 263123, "uncollectable": 0})
    assert caplog.messages == [
        "collecting garbage paused this worker for 2.4 s (generation 2, 263123 objects freed)"
    ]


def test_installed_it_reads_what_the_collector_passes(caplog: pytest.LogCaptureFixture) -> None:
    """As ``gc.callbacks`` calls it, with a real collection's ``info`` (its clock says 2 s)."""
    ticks = iter(range(0, 1000, 2))
    pauses = CollectionPauses(clock=lambda: float(next(ticks)))
    gc.callbacks.append(pauses)
    try:
        with caplog.at_level(logging.WARNING, logger="skyhop.worker"):
            gc.collect()
    finally:
        gc.callbacks.remove(pauses)
    assert caplog.messages[-1].startswith("collecting garbage paused this worker for 2.0 s (generation 2, ")
