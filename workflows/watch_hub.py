"""``WatchHubWorkflow``: one activity follows many managed jobs' runs, so a running job holds none.

A managed job's running attempt is followed by its shard's hub (``contract.watch_hub``), not by
an activity of its own: ``WATCH_HUB_SHARDS`` hubs, each with one ``watch_followed`` activity on the
long queue that polls every run it follows, cost a few dozen worker slots and heartbeats for
10,000 running jobs, and a running job writes no history event until its run ends. A hub that
follows nothing holds no activity (its activity returns; the next ``follow`` starts another).

- The hub's state is its follow set (``FollowedRun`` by key), changed by the ``follow`` and
  ``forget`` signals; every change bumps a version the activity asks each cycle, so the activity
  re-reads the set only when it changed, and its input (the hub's id) stays small.
- A killed worker's activity is retried by Temporal and carries on from the hub's state.
- A long history continues as new with the follow set; the new run starts an activity of its own
  (the old one ends when its heartbeat finds its run closed; both may signal an end meanwhile).

``RunEnds`` is the owner's side: ``ManagedTask`` follows its run through it and waits for the end.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, FailureError

with workflow.unsafe.imports_passed_through():
    from skyhop.activities import watch_hub
    from skyhop.activities.models import FollowedRun, FollowRunInput, FollowSet, ForgetRunInput, WatchHubInput
    from skyhop.contract import LONG_QUEUE, SHORT_QUEUE, WorkflowType, host_queue
    from skyhop.contract.watch_hub import (
        RunEnded,
        WatchHubQuery,
        WatchHubSignal,
        watch_hub_workflow_id,
    )
    from skyhop.providers.runtime.jobs import JobOutcome
    from skyhop.workflows.changes import Changes
    from skyhop.workflows.options import HEARTBEAT, LONG_RETRY, SHORT_RETRY
    from skyhop.workflows.stages import history_is_long

__all__ = ["RunEnds", "WatchHubWorkflow"]

_HUB_FORGETS_ENDED = "hub-forgets-ended-runs"
"""An owner no longer tells the hub to forget a run that ended: the hub's activity forgets every
end it delivers, and the owner's signal cost its decision a workflow task's round trip."""

_FORGET_UNAWAITED = "forget-unawaited"
"""An owner that stops following a run (its job cancelled) sends the hub's ``forget`` without
waiting for it: its cluster's removal waited a workflow task's round trip for it."""

_RESTART_AFTER = timedelta(seconds=30)
"""How long a hub whose activity failed for good waits before it starts another."""

_FORGETS_KEPT = 2_000
"""The latest forgotten runs a hub names to its activity (``followed(since)``); an activity that
asks from before them gets every key instead."""


@workflow.defn(name=WorkflowType.WATCH_HUB)
class WatchHubWorkflow:
    @workflow.init
    def __init__(self, input: WatchHubInput) -> None:
        self._runs = {run.key: run for run in input.follow.runs}
        self._version = input.follow.version
        self._since = dict.fromkeys(self._runs, self._version)
        """The version at which each run was followed."""
        self._forgets: deque[tuple[int, str]] = deque(maxlen=_FORGETS_KEPT)
        """The latest forgotten runs, with the version that forgot them."""
        self._forgets_from = self._version
        """Every run forgotten after this version is in ``_forgets``."""
        self._watcher: asyncio.Task[None]
        """The hub's one activity (``activities.watch_hub.watch_followed``)."""

    @workflow.signal(name=WatchHubSignal.FOLLOW)
    def follow(self, run: FollowedRun) -> None:
        if run.key not in self._runs:
            self._runs[run.key] = run
            self._version += 1
            self._since[run.key] = self._version

    @workflow.signal(name=WatchHubSignal.FORGET)
    def forget(self, keys: list[str]) -> None:
        forgotten = [key for key in keys if self._runs.pop(key, None) is not None]
        if not forgotten:
            return
        self._version += 1
        for key in forgotten:
            del self._since[key]
            if len(self._forgets) == self._forgets.maxlen:
                self._forgets_from = self._forgets[0][0]
            self._forgets.append((self._version, key))

    @workflow.query(name=WatchHubQuery.VERSION)
    def version(self) -> int:
        return self._version

    @workflow.query(name=WatchHubQuery.FOLLOWED)
    def followed(self, since: int | None = None) -> FollowSet:
        if since is None:
            return FollowSet(version=self._version, runs=list(self._runs.values()))
        runs = [run for key, run in self._runs.items() if self._since[key] > since]
        if since < self._forgets_from:
            return FollowSet(version=self._version, runs=runs, keys=list(self._runs))
        forgotten = [key for version, key in self._forgets if version > since]
        return FollowSet(version=self._version, runs=runs, forgotten=forgotten)

    @workflow.run
    async def run(self, input: WatchHubInput) -> None:
        while True:
            # An idle hub holds no activity: it waits for a run to follow.
            await workflow.wait_condition(lambda: bool(self._runs) or history_is_long(input.history_limit))
            if not self._runs:
                break
            watcher = self._watcher = workflow.start_activity(
                watch_hub.watch_followed,
                workflow.info().workflow_id,
                task_queue=host_queue(LONG_QUEUE, input.host) if input.host else LONG_QUEUE,
                start_to_close_timeout=timedelta(days=365),
                heartbeat_timeout=HEARTBEAT,
                retry_policy=LONG_RETRY,
                summary="watch the followed runs",
            )
            await workflow.wait_condition(
                lambda: self._watcher.done() or history_is_long(input.history_limit)
            )
            if not watcher.done():
                break
            try:
                await watcher  # it returns once the hub follows nothing
            except ActivityError as exc:
                workflow.logger.warning("the hub's watcher failed for good (%s); starting another", exc)
                await workflow.sleep(_RESTART_AFTER)
        await workflow.wait_condition(workflow.all_handlers_finished)
        workflow.continue_as_new(
            WatchHubInput(follow=self.followed(), history_limit=input.history_limit, host=input.host)
        )


class RunEnds:
    """An owner's side of the hubs: the runs it waits on, and the ends the hubs signalled for them.

    The owner's ``run_ended`` signal handler calls ``receive``; an end for a key not waited on (a
    retried hub activity's second one, or a forgotten run's) is ignored, so each end is handled once.
    """

    def __init__(self, changes: Changes, awaited: str | None = None, *, start_follows: bool = False) -> None:
        """``changes``: the owner's (its baseline stands for ``_HUB_FORGETS_ENDED`` and
        ``_FORGET_UNAWAITED``). ``awaited``: the key of a run an earlier run of the owner followed,
        whose end may come before this run asks for it (``end_of`` without ``start``).
        ``start_follows``: the activity that starts a run also has its hub follow it."""
        self._changes = changes
        self._start_follows = start_follows
        self._waiting: dict[str, RunEnded | None] = {} if awaited is None else {awaited: None}
        self._forgets: set[asyncio.Task[None]] = set()

    def receive(self, ended: RunEnded) -> None:
        if ended.key in self._waiting and self._waiting[ended.key] is None:
            self._waiting[ended.key] = ended

    async def end_of(
        self,
        run: FollowedRun,
        shard: int,
        *,
        start: Callable[[FollowRunInput | None], Awaitable[JobOutcome | None]] | None = None,
        idle: Callable[[Callable[[], bool]], Awaitable[None]] | None = None,
    ) -> RunEnded:
        """Start the run (``start``, given the follow when it is to send it itself: it returns how
        the run failed to start, or None) and follow it on hub ``shard``, then wait for its end;
        without ``start`` an earlier run of the owner did both. The hub forgets the run on every
        way out (an end, by the hub's activity that delivers it; any other, by the owner's signal).

        The key is waited on before the run starts: an end signalled at once is not missed. Once
        the hub follows the run, ``idle`` is awaited, given whether the end came meanwhile; it may
        continue the owner as new.
        """
        key = run.key
        self._waiting.setdefault(key, None)
        sent = start is None or self._start_follows  # the hub may follow it: it is told to forget it
        try:
            if start is not None:
                follow = FollowRunInput(shard=shard, run=run)
                failed = await start(follow if self._start_follows else None)
                if failed is not None:
                    del self._waiting[key]  # it never ran, so no hub follows it
                    return RunEnded(key=key, outcome=failed)
                if not self._start_follows:
                    sent = True
                    await workflow.execute_activity(
                        watch_hub.follow_run,
                        follow,
                        task_queue=SHORT_QUEUE,
                        start_to_close_timeout=timedelta(seconds=30),
                        retry_policy=SHORT_RETRY,
                        summary=f"follow {key}",
                    )
                if idle is not None:
                    await idle(lambda: self._waiting[key] is not None)
            await workflow.wait_condition(lambda: self._waiting[key] is not None)
        except (asyncio.CancelledError, ActivityError):
            # Not on eviction (a ``BaseException`` that is neither): no workflow state is touched then.
            del self._waiting[key]
            if not sent:
                raise
            if self._changes.has(_FORGET_UNAWAITED):
                forget = asyncio.create_task(self._forget(shard, key, run.handle.offering.host))
                self._forgets.add(forget)
                forget.add_done_callback(self._forgets.discard)
            else:
                await self._forget(shard, key, run.handle.offering.host)
            raise
        ended = self._waiting.pop(key)
        assert ended is not None
        if not self._changes.has(_HUB_FORGETS_ENDED):
            await self._forget(shard, key, run.handle.offering.host)
        return ended

    async def _forget(self, shard: int, key: str, host: str | None) -> None:
        """Tell the hub to drop the run: a local activity under the owner's baseline (no event comes
        back to wake the owner, and a cancel of thousands is a few signals to each hub), else a
        signal (a hub the follow never started is not there to tell)."""
        if self._changes.baseline:
            await workflow.execute_local_activity(
                watch_hub.forget_run,
                ForgetRunInput(shard=shard, key=key, host=host),
                start_to_close_timeout=timedelta(seconds=30),
                retry_policy=SHORT_RETRY,
            )
            return
        with contextlib.suppress(FailureError):
            await workflow.get_external_workflow_handle(watch_hub_workflow_id(shard, host)).signal(
                WatchHubSignal.FORGET, [key]
            )
