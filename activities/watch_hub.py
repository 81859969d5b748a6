"""A watch hub's activities: follow a run (signal-with-start), and poll every followed run.

``watch_followed`` is the one activity of a hub (``workflows.watch_hub``): it runs while the hub
follows runs, and returns once it follows none. Its input is only the hub's id, so the hub's history
does not grow with what it follows: the follow set is the hub's ``followed`` query, asked every
``_ASK_HUB_EVERY`` cycles (and re-read when its ``version`` changed). A follow or forget sent from
this worker process is also handed to the activity as its signal goes (``_Inbox``), which takes it
at once, with no question to the hub.

Each cycle asks every followed run's nodes once (``ClusterWatch``, as a cluster's watcher does),
ships each run's new output to the store, and sends each ended run's owner its ``RunEnded`` (with
the provider's view of its nodes, when it did not succeed); the hub is told to ``forget`` it, with
the runs a cancel let go of here, in one signal before the activity next asks the hub.
A run on folder nodes of this machine (``NodeRuntime.in_process``) is not asked while the hub holds
its runners (``activities.runner_exits``): a runner's exit wakes the hub, which asks the run then,
between cycles. A killed worker's activity is retried by Temporal and starts from the hub's follow
set and the nodes' records, so an end is sent at least once; the owner handles the first it waits
for. A run forgotten from another worker process (a cancel, whose cluster's removal ends the run)
may have its end sent before the next question to the hub tells: its owner ignores an end it no
longer waits for (``workflows.watch_hub.RunEnds``).

Logs: rank 0's new output is shipped to the store on each cycle (``activities.log_ship``), after
the run's state was read, so the cycle that sees the end also ships the last bytes, then the end
marker; a retried activity carries on where the store's copy ends and never writes a byte twice.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from datetime import timedelta

from temporalio import activity
from temporalio.client import Client, WorkflowHandle, WorkflowQueryFailedError
from temporalio.service import RPCError, RPCStatusCode

from skyhop.activities.cluster_ops import probe_cluster
from skyhop.activities.job_watch import ClusterWatch
from skyhop.activities.log_ship import LogShipper
from skyhop.activities.models import (
    FollowedRun,
    FollowRunInput,
    FollowSet,
    ForgetRunInput,
    WatchHubInput,
    WatchJobsInput,
)
from skyhop.activities.node_jobs import CALL_TIMEOUT_S, POLL_MAX_S
from skyhop.activities.runner_exits import RunnerExits
from skyhop.activities.signal_batches import SignalBatches
from skyhop.contract import WORKFLOW_QUEUE, WorkflowType
from skyhop.contract.watch_hub import (
    RUN_ENDED_SIGNAL,
    RunEnded,
    WatchHubQuery,
    WatchHubSignal,
    watch_hub_workflow_id,
)
from skyhop.providers.base import NodeStatus
from skyhop.providers.runtime.jobs import JobOutcome, NodeJobStatus
from skyhop.storage.logs import attempt_stream, log_store

__all__ = ["CYCLE_S", "Followed", "follow", "follow_run", "forget_run", "poll_followed", "watch_followed"]

CYCLE_S = POLL_MAX_S
"""At most this long between two questions to a run's nodes: a run's end shows within it."""
_QUIET_SHIP_EVERY = 4
"""A run whose output has been quiet for this many cycles has its log read only every this many
cycles (its end still ships every byte before the end marker): reading 10,000 quiet logs every
cycle was a third of the hubs' cycles."""
_INLINE_BATCH = 64
"""Runs on in-process nodes a cycle asks between two turns of the event loop."""
_MOST_REST_S = 2.0
"""Longest rest between two cycles (well below the heartbeat timeout, ``workflows.options.HEARTBEAT``)."""
_BEAT_S = 1.0
"""How often the activity heartbeats, whatever a cycle is waiting for."""
_QUERY_TIMEOUT = timedelta(seconds=CALL_TIMEOUT_S)
"""Bound on one question to the hub: a hub whose worker is busy answers next cycle instead."""
_ASK_HUB_EVERY = 10
"""Cycles between two questions to the hub about its follow set. A follow or forget sent from this
worker process reaches the hub's activity at once (``_Inbox``); only one sent from another process
waits for this. Each question is a query the worker answers: 32 hubs asking every second were a
steady load on the worker and the server at 10,000 idle jobs, and asking on each follow and each
runner's exit put two queries, waiting behind the burst's workflow tasks (0.5 s on average at
1,000 jobs), on the way from each preemption to its relaunch decision."""
_ASK_HELD_EVERY = 30
"""A run whose runners the hub holds (``RunnerExits``) has its nodes asked every this many cycles
all the same: a runner whose pid was taken by another process before it was held would be waited
on for ever."""


@activity.defn
async def follow_run(request: FollowRunInput) -> None:
    """Follow the run on its shard's hub: a job from before ``activities.jobs.start_managed_run``,
    which follows the run it starts itself."""
    await follow(request)


async def follow(request: FollowRunInput) -> None:
    """Follow the run on its shard's hub, starting the hub if it is not running (signal-with-start),
    and wake the hub's activity if it runs in this process (it asks the hub what changed then).
    Idempotent: a hub that follows the run's key already keeps it as it is."""
    hub_id = watch_hub_workflow_id(request.shard, request.host)
    await activity.client().start_workflow(
        WorkflowType.WATCH_HUB,
        WatchHubInput(host=request.host),
        id=hub_id,
        task_queue=WORKFLOW_QUEUE,
        start_signal=WatchHubSignal.FOLLOW.value,
        start_signal_args=[request.run],
    )
    # Once the hub has it: a forget the activity sends for the run's end comes after the follow.
    here = _HERE.get(hub_id)
    if here is not None:
        here.follow(request.run)


async def _signal_forget(client: Client, hub_id: str, keys: list[str]) -> None:
    """Tell the hub to forget ``keys`` (a hub that is not running follows nothing to forget)."""
    await _signal_unless_gone(client, hub_id, WatchHubSignal.FORGET.value, keys)


_forgets: SignalBatches[str, str] = SignalBatches(_signal_forget, 500)
"""Keys of a few dozen bytes: a cancel of thousands of jobs is a few signals to each hub."""


@activity.defn
async def forget_run(request: ForgetRunInput) -> None:
    """Stop the run's hub following it (its owner no longer waits for its end: a cancel).

    The hub's activity, if it runs in this process, lets go of the run at once (its cluster's
    removal, which comes next, kills its runners) and tells the hub with the other runs it let go
    of, before it next asks the hub (``_owed``): at 10,000 jobs, a cancel of 2,000 sent 1,953
    signals, each a few of the server's writes and a workflow task of the hub, and held each
    cancel's workflow task until its own landed. Otherwise the hub is sent a signal, with the runs
    forgotten meanwhile."""
    hub_id = watch_hub_workflow_id(request.shard, request.host)
    here = _HERE.get(hub_id)
    if here is not None:
        here.forget(request.key)
        return
    await _forgets.send(activity.client(), hub_id, request.key)


@activity.defn
async def watch_followed(hub_id: str) -> None:
    """Poll the hub's followed runs every ``CYCLE_S`` until it follows none (or its run closes:
    then this is cancelled). An idle hub then holds no activity, and an idle skyhop polls nothing."""
    client = activity.client()
    hub: WorkflowHandle[object, object] = client.get_workflow_handle(hub_id)
    followed: dict[str, Followed] = {}
    earlier = _HERE.get(hub_id)  # the activity of the hub's run before (continued as new)
    inbox = _HERE[hub_id] = _Inbox(earlier.owed if earlier is not None else set())
    exits = inbox.exits
    version: int | None = None
    unasked = 0
    beating = asyncio.create_task(_beat())
    try:
        while True:
            began = time.monotonic()
            if version is None or not followed or unasked >= _ASK_HUB_EVERY:
                await _owed(client, hub_id, inbox.owed)
                version, unasked = await _refresh(hub, version, followed, exits, inbox.owed), 0
                inbox.take(followed)  # after the answer, which may predate a follow or forget told here
                if version is not None and not followed and not inbox.owed:
                    return
            unasked += 1
            await _ask(client, inbox, followed, list(followed.values()))
            took = time.monotonic() - began
            # A cycle slower than CYCLE_S (thousands of runs on a busy worker) is followed by as
            # long a rest, so the hubs leave the worker time for the rest, but never a rest the
            # heartbeat timeout could notice.
            rested = time.monotonic() + min(max(CYCLE_S - took, took), _MOST_REST_S)
            while (left := rested - time.monotonic()) > 0 and await exits.wait(left):
                # Woken by a runner's exit, or by a follow or forget told here (then nothing fired).
                fired = exits.fired()
                inbox.take(followed)
                await _ask(client, inbox, followed, [followed[k] for k in fired if k in followed])
    finally:
        beating.cancel()
        exits.close()
        if _HERE.get(hub_id) is inbox:
            del _HERE[hub_id]


async def _beat() -> None:
    """Heartbeat every ``_BEAT_S`` while the activity runs: it tells Temporal that its worker lives.

    A cycle's own pace is no liveness signal: a cycle that waits on a busy hub's answer or on the
    owners' signals took longer than the heartbeat timeout during a burst, and each time the
    activity was retried, reading every run again. What a cycle waits for is bounded by its own
    timeouts instead."""
    while True:
        activity.heartbeat()
        await asyncio.sleep(_BEAT_S)


async def _ask(
    client: Client,
    inbox: _Inbox,
    followed: dict[str, Followed],
    runs: list[Followed],
) -> None:
    """Ask ``runs`` (a cycle: every followed run) once, and deliver the ends they told but those of
    runs forgotten meanwhile (a cancel's removal ends its run: its owner waits for no end); the
    hub is told to forget the delivered ones with the next question (``_Inbox.owed``)."""
    if not runs:
        return
    ended = await poll_followed(runs, inbox.exits)
    inbox.take(followed)
    delivered = {key: end for key, end in ended.items() if followed.pop(key, None) is not None}
    await _deliver(client, delivered)
    inbox.owed.update(delivered)


class _Inbox:
    """What wakes a hub's activity in this process: its runners' exits (``exits``), and the runs
    this process's activities followed (once the hub has them) and forgot (before the hub does),
    which the activity takes as they are told, with no question to the hub."""

    def __init__(self, owed: set[str]) -> None:
        self.exits = RunnerExits()
        self._follows: list[FollowedRun] = []
        self._forgets: list[str] = []
        self.owed = owed
        """Runs let go of here that the hub still follows: ended ones, and forgotten ones. The
        activity tells the hub before it next asks it (``_owed``). A run whose forget is lost with
        this process is asked again by the hub's next activity: gone with its cluster, its end goes
        to an owner that no longer waits for it, and the hub forgets it."""

    def follow(self, run: FollowedRun) -> None:
        self._follows.append(run)
        self.exits.wake()

    def forget(self, key: str) -> None:
        """Let go of the run at once; the hub is told later (``owed``)."""
        self._forgets.append(key)
        self.owed.add(key)
        self.exits.wake()

    def take(self, followed: dict[str, Followed]) -> None:
        """Bring ``followed`` up to what was told since the last call (a run is forgotten only
        after it was followed)."""
        follows, self._follows = self._follows, []
        forgets, self._forgets = self._forgets, []
        _add(followed, follows)
        _drop(followed, self.exits, forgets)


_HERE: dict[str, _Inbox] = {}
"""The inbox of the activity of each hub that runs in this process, by the hub's workflow id."""


class Followed:
    """One followed run and what its nodes said so far."""

    def __init__(self, run: FollowedRun) -> None:
        self.run = run
        self.watch = ClusterWatch(WatchJobsInput(handle=run.handle, jobs=[run.job], newer_than=None))
        self.key = self.watch.trackers[run.job.job_id].key
        head = self.watch.runtimes[run.job.nodes[0]]
        stream = attempt_stream(run.log.job_id, run.log.task_index, run.log.attempt)
        self.logs = LogShipper(log_store(), stream, self.key, [head], beat=activity.heartbeat)
        """Rank 0's output is kept, as ``skyhop logs`` shows a job."""
        self.quiet = 0
        """Cycles since the run's log last grew."""
        self.in_process = all(runtime.in_process for runtime in self.watch.runtimes)
        self.unasked = 0
        """Cycles since the run's nodes were last asked (while its runners are held)."""

    async def cycle(self, exits: RunnerExits) -> JobOutcome | None:
        """Ask the run's nodes once, unless ``exits`` holds its runners (then only every
        ``_ASK_HELD_EVERY`` cycles), and ship its new output (a quiet run's only every
        ``_QUIET_SHIP_EVERY`` cycles); its outcome if it ended.

        A run whose nodes gave an unexpected error is asked again next cycle: it holds up no other.
        """
        key = self.run.key
        if exits.armed(key) and self.unasked < _ASK_HELD_EVERY:
            self.unasked += 1
            await self._ship()
            return None
        self.unasked = 0
        try:
            result = await self.watch.poll()
        except Exception as exc:
            activity.logger.warning("asking the nodes of %s failed: %r", key, exc)
            return None
        outcome = result.ended.get(self.run.job.job_id)
        if outcome is None:
            await self._ship()
            if self.in_process and not exits.armed(key):
                exits.arm(key, self._runner_pids())
        else:
            exits.disarm(key)
            await self.logs.finish()
            await self.watch.stop_ended(result)
        return outcome

    def _runner_pids(self) -> list[int]:
        """The run's runners, one per node, if every node read them running (else none)."""
        pids = [self.watch.runtimes[node].runner_pid(self.key) for node in self.run.job.nodes]
        return [pid for pid in pids if pid is not None] if None not in pids else []

    async def _ship(self) -> None:
        if self.quiet < _QUIET_SHIP_EVERY or self.quiet % _QUIET_SHIP_EVERY == 0:
            self.quiet = 0 if await self.logs.ship() else self.quiet + 1
        else:
            self.quiet += 1


async def poll_followed(
    followed: list[Followed], exits: RunnerExits
) -> dict[str, tuple[FollowedRun, JobOutcome]]:
    """One cycle: ask each run's nodes once (unless ``exits`` holds its runners), ship its output;
    the runs that ended, by key.

    Runs on remote nodes are asked at once, a task each; runs on nodes in this process
    (``NodeRuntime.in_process``) one after another while those wait: a task per run and cycle cost
    a quarter of a busy worker's CPU at 10,000 runs. Every ``_INLINE_BATCH`` of them, the cycle lets
    the rest of the worker run.
    """
    remote = [each for each in followed if not each.in_process]
    asked = asyncio.gather(*(each.cycle(exits) for each in remote))
    outcomes: list[tuple[Followed, JobOutcome | None]] = []
    try:
        for index, each in enumerate(each for each in followed if each.in_process):
            if index and index % _INLINE_BATCH == 0:
                await asyncio.sleep(0)
            outcomes.append((each, await each.cycle(exits)))
    except BaseException:
        asked.cancel()
        raise
    outcomes += zip(remote, await asked, strict=True)
    return {each.run.key: (each.run, outcome) for each, outcome in outcomes if outcome is not None}


async def _refresh(
    hub: WorkflowHandle[object, object],
    version: int | None,
    followed: dict[str, Followed],
    exits: RunnerExits,
    owed: set[str],
) -> int | None:
    """Bring ``followed`` up to the hub's follow set if its version changed, but for the runs let
    go of here that the hub does not know of yet (``owed``); the version now.

    Only what changed since ``version`` comes (the runs followed and forgotten since; every key
    followed when the hub no longer knows what it forgot since): at 10,000 runs coming and going
    (cancels, relaunches), the whole set asked again every cycle cost a sixth of the worker's CPU.
    A hub that does not answer (its worker busy, say) keeps the set as it was.
    """
    try:
        current: int = await hub.query(
            WatchHubQuery.VERSION.value, result_type=int, rpc_timeout=_QUERY_TIMEOUT
        )
        if current == version:
            return version
        follow: FollowSet = await hub.query(
            WatchHubQuery.FOLLOWED.value, version, result_type=FollowSet, rpc_timeout=_QUERY_TIMEOUT
        )
    except (RPCError, WorkflowQueryFailedError) as exc:
        activity.logger.warning("the hub %s did not answer (%s); following what it said before", hub.id, exc)
        return version
    if follow.forgotten is not None:
        gone = [key for key in dict.fromkeys(follow.forgotten) if key in followed]
    else:
        keys = set(follow.keys if follow.keys is not None else (run.key for run in follow.runs))
        gone = [key for key in followed if key not in keys]
    _drop(followed, exits, gone)
    _add(followed, (run for run in follow.runs if run.key not in owed))
    return follow.version


def _add(followed: dict[str, Followed], runs: Iterable[FollowedRun]) -> None:
    for run in runs:
        if run.key not in followed:
            followed[run.key] = Followed(run)


def _drop(followed: dict[str, Followed], exits: RunnerExits, keys: Iterable[str]) -> None:
    """Let go of the runs of ``keys`` still followed, and of their runners' pidfds."""
    for key in keys:
        if followed.pop(key, None) is not None:
            exits.disarm(key)


async def _owed(client: Client, hub_id: str, owed: set[str]) -> None:
    """Tell the hub to forget the runs let go of here, in one signal; on an error they stay owed.

    Not with each end or cancel: a hub's activity that told each at once sent a signal for nearly
    every one of them, and every signal is a few of the server's writes and a workflow task."""
    if not owed:
        return
    keys = sorted(owed)
    try:
        await _signal_forget(client, hub_id, keys)
    except RPCError as exc:
        activity.logger.warning("telling the hub %s what it no longer follows failed (%s)", hub_id, exc)
        return
    owed.difference_update(keys)


async def _deliver(client: Client, ended: dict[str, tuple[FollowedRun, JobOutcome]]) -> None:
    """Tell each owner its run's end (an owner gone is skipped); the hub forgets the runs later
    (``_Inbox.owed``)."""
    if not ended:
        return
    statuses = await asyncio.gather(*(_provider_says(run, outcome) for run, outcome in ended.values()))
    await asyncio.gather(
        *(
            _signal_unless_gone(
                client, run.owner, RUN_ENDED_SIGNAL, RunEnded(key=key, outcome=outcome, node_statuses=told)
            )
            for (key, (run, outcome)), told in zip(ended.items(), statuses, strict=True)
        )
    )


async def _provider_says(run: FollowedRun, outcome: JobOutcome) -> list[NodeStatus] | None:
    """The provider's view of an unsuccessful run's nodes, sent with its end so the owner decides
    preempted or failed at once, with no probe of its own (the slow path: an activity and a
    workflow task more, per preemption). A success needs no answer; a provider that cannot tell,
    fails, or is slower than ``CALL_TIMEOUT_S`` gives None, and the owner asks it itself."""
    if outcome.status == NodeJobStatus.SUCCEEDED:
        return None
    try:
        async with asyncio.timeout(CALL_TIMEOUT_S):
            return (await probe_cluster(run.handle)).statuses
    except Exception as exc:
        activity.logger.warning("asking the provider about %s failed: %r", run.key, exc)
        return None


async def _signal_unless_gone(client: Client, workflow_id: str, signal: str, arg: object) -> None:
    """Signal the workflow; one that has closed (an owner that ended, a hub that stopped) is skipped."""
    try:
        await client.get_workflow_handle(workflow_id).signal(signal, arg)
    except RPCError as exc:
        if exc.status != RPCStatusCode.NOT_FOUND:
            raise
