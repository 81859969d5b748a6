"""A watch hub's follow set as its activity asks it: what changed since a version, or every key."""

from __future__ import annotations

from skyhop.activities.models import AttemptLog, FollowedRun, FollowSet, WatchedJob, WatchHubInput
from skyhop.providers.base import ClusterHandle, Offering
from skyhop.workflows import watch_hub
from skyhop.workflows.watch_hub import WatchHubWorkflow

_HANDLE = ClusterHandle(
    cluster_name="c",
    offering=Offering(provider="sim", instance_type="t", cpus=1, memory_gib=1, price=0),
    nodes=[],
)


def _run(key: str) -> FollowedRun:
    job, log = WatchedJob(job_id=1, nodes=[0], running=True), AttemptLog(job_id=1, task_index=0, attempt=1)
    return FollowedRun(key=key, owner=f"owner-{key}", handle=_HANDLE, job=job, log=log)


def _applied(followed: set[str], change: FollowSet) -> set[str]:
    """What an activity that followed ``followed`` follows after ``change`` (as ``_refresh`` does)."""
    if change.forgotten is not None:
        followed = followed - set(change.forgotten)
    else:
        followed = followed & set(change.keys if change.keys is not None else [r.key for r in change.runs])
    return followed | {run.key for run in change.runs}


def test_asked_since_a_version_a_hub_sends_what_was_followed_and_forgotten_since() -> None:
    hub = WatchHubWorkflow(WatchHubInput())
    for key in "abc":
        hub.follow(_run(key))
    seen = hub.followed()
    assert (seen.version, [r.key for r in seen.runs], seen.forgotten, seen.keys) == (
        3,
        ["a", "b", "c"],
        None,
        None,
    )
    hub.forget(["b", "nobody"])
    hub.follow(_run("d"))
    hub.forget(["d"])
    hub.follow(_run("d"))  # followed again after it was forgotten: followed
    change = hub.followed(seen.version)
    assert ([r.key for r in change.runs], change.forgotten, change.keys) == (["d"], ["b", "d"], None)
    assert _applied({"a", "b", "c"}, change) == {"a", "c", "d"}
    assert hub.followed(change.version) == FollowSet(version=change.version, runs=[], forgotten=[])


def test_a_hub_that_no_longer_knows_every_run_forgotten_since_sends_every_key(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(watch_hub, "_FORGETS_KEPT", 3)
    hub = WatchHubWorkflow(WatchHubInput())
    for key in "abcdef":
        hub.follow(_run(key))
    seen = hub.followed()
    hub.forget(["a", "b"])
    middle = hub.followed(seen.version)
    hub.forget(["c"])
    hub.forget(["d"])  # "a" is no longer named: a version before its forget gets every key
    stale = hub.followed(seen.version)
    assert (stale.forgotten, sorted(stale.keys or [])) == (None, ["e", "f"])
    assert _applied(set("abcdef"), stale) == {"e", "f"}
    recent = hub.followed(middle.version)
    assert (recent.forgotten, recent.keys) == (["c", "d"], None)
    assert _applied(set("cdef"), recent) == {"e", "f"}
