"""One task of a managed job, inside its ``ManagedJobWorkflow``: cluster up, setup, run, recover.

``ManagedTask.run`` brings the task's dedicated cluster up (``Provisioner``, with the searches
``workflows.recovery`` gives), readies it (``prepare_nodes``), starts the run (a job whose id is the
attempt number and whose ``task_id`` is the task's, the same across recoveries; the activity,
``start_managed_run``, also has the job's watch hub follow it and sends the job's RUNNING row) and
learns its end as a signal from that hub (``workflows.watch_hub``), which keeps rank 0's output in
the store as it runs. Whether the nodes of a run that did not succeed are still
there is the provider's answer, which the hub sends with the end (so the decision is made in the
workflow task of the end); when the hub got none, the task asks itself (``probe_cluster``), and a
provider that does not answer is asked again on a durable backoff timer, never taken for a
preemption. ``workflows.recovery.verdict`` decides. Whatever ends the task (its end, the job's
cancel, a sibling's failure), its cluster is removed first.

Nothing runs while the run runs: no timer, no activity (the hub's one polls many jobs' runs), no
history event.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from skyhop.activities import jobs
    from skyhop.activities.models import (
        AttemptLog,
        FollowedRun,
        FollowRunInput,
        ManagedRunStart,
        RunJobInput,
        WatchedJob,
    )
    from skyhop.contract import ErrorType, JobStatus, LaunchStage, setup_key
    from skyhop.contract.clusters import JobRecord, ProvisionState
    from skyhop.contract.failures import innermost_message
    from skyhop.contract.job_index import JobIndexRow, ManagedJobStatus
    from skyhop.contract.managed_jobs import (
        EndReason,
        JobEnd,
        ManagedJobRequest,
        ManagedTaskState,
        RunningAttempt,
        TaskAttempt,
        jobgroup_env_name,
    )
    from skyhop.contract.watch_hub import RunEnded, run_key, watch_hub_shard
    from skyhop.providers.base import ClusterHandle, NodeStatus
    from skyhop.providers.runtime.jobs import JobOutcome, NodeJobStatus
    from skyhop.spec import JobGroup, JobRecovery, Task
    from skyhop.storage.plan import cluster_storage, storage_plan
    from skyhop.workflows.failover import history_table
    from skyhop.workflows.group_hosts import hosts_lines, with_hosts
    from skyhop.workflows.provisioner import Provisioner, ProvisionSpec, remove_nodes
    from skyhop.workflows.recovery import PREEMPTED, Search, Verdict, nodes_lost, searches_for, verdict
    from skyhop.workflows.stages import (
        node_statuses,
        prepare_nodes,
        raise_if_cancelled,
        raise_if_cancelled_by,
        run_long,
    )
    from skyhop.workflows.task_book import TaskBook
    from skyhop.workflows.watch_hub import RunEnds

__all__ = ["Group", "ManagedTask"]

_LONG_TIMEOUT = timedelta(hours=24)
_PROBE_FIRST = timedelta(seconds=1)
_PROBE_MAX = timedelta(minutes=5)
"""The workflow retries a probe itself, on a timer it shows (``waiting``)."""


class Group:
    """The clusters of a parallel group: each run starts once all are up, knowing the others' nodes."""

    def __init__(self, size: int, fields: JobGroup | None = None) -> None:
        self.size = size
        self.fields = fields
        """The header's fields; None in a request from before they were carried."""
        self.handles: dict[int, tuple[str | None, ClusterHandle]] = {}
        self.started = False

    def env(self) -> dict[str, str]:
        """``SKYHOP_JOBGROUP_<NAME>_IPS`` of every task (see ``contract.managed_jobs``), and the
        group's name as ``SKYHOP_JOBGROUP_NAME``, the domain of its hostnames."""
        env = {}
        for index, (name, handle) in sorted(self.handles.items()):
            ips = "\n".join(node.ip for node in handle.nodes)
            for prefix in ("SKYHOP", "SKYPILOT"):
                env[f"{prefix}_JOBGROUP_{jobgroup_env_name(name, index)}_IPS"] = ips
        if self.fields is not None and self.fields.name:
            for prefix in ("SKYHOP", "SKYPILOT"):
                env[f"{prefix}_JOBGROUP_NAME"] = self.fields.name
        return env

    def task_on(self, handle: ClusterHandle, task: Task) -> Task:
        """``task`` as it runs on ``handle``'s nodes: with the group's variables (``env``), and
        adding the group's hostnames first when its names make them and the nodes are machines of
        their own (``workflows.group_hosts``)."""
        fields, run = self.fields, task.run
        if (
            fields is not None
            and fields.hostnames
            and run is not None
            and handle.nodes[0].access.kind != "local"
        ):
            tasks = [
                (name or "", [node.ip for node in h.nodes]) for _, (name, h) in sorted(self.handles.items())
            ]
            run = with_hosts(run, fields.name, hosts_lines(fields.name, tasks))
        return task.model_copy(update={"envs": {**task.envs, **self.env()}, "run": run})


class _Ended(Exception):
    """The task ended before a run could start (prechecks, no resource, setup)."""

    def __init__(self, end: JobEnd) -> None:
        super().__init__(end.message)
        self.end = end


class ManagedTask(TaskBook):
    """Task ``state.index`` of ``request``; ``changed`` publishes the job after a status change."""

    def __init__(
        self,
        request: ManagedJobRequest,
        state: ManagedTaskState,
        changed: Callable[[], None],
        ends: RunEnds,
        *,
        group: Group | None = None,
        provision: ProvisionState | None = None,
        running: RunningAttempt | None = None,
        continue_as_new: Callable[[ProvisionState | None], None] = lambda state: None,
        continue_running: Callable[[RunningAttempt, Callable[[], bool]], Awaitable[None]] | None = None,
        take_report: Callable[[], JobIndexRow | None] = lambda: None,
    ) -> None:
        """``ends`` receives the job's ``run_ended`` signals; ``provision`` resumes a search that was
        waiting for capacity, ``running`` a run that was followed already; ``continue_as_new`` may
        continue the job as new at a point where this task holds no cluster, and
        ``continue_running`` once its run is followed (given whether its end came meanwhile);
        ``take_report`` hands over the job's row still to send, which the run's start then sends."""
        super().__init__(state, changed)
        self.request = request
        self.task: Task = request.tasks[state.index]
        self._mounts = storage_plan(self.task.file_mounts)
        self.policy = self.task.resources.job_recovery or JobRecovery()
        self._group = group
        self._resume_provision = provision
        self._running = running
        self._continue_as_new = continue_as_new
        self._continue_running = continue_running
        self._take_report = take_report
        self.handle: ClusterHandle | None = None
        """The cluster this task holds now, if any."""
        self.stopped_with: JobEnd | None = None
        """The end an auxiliary task of a job group is given when it is stopped (``stop``)."""
        self._ends = ends

    def stop(self, end: JobEnd) -> None:
        """An auxiliary task's primary tasks ended: its cancellation (the caller's) ends it with ``end``."""
        self.stopped_with = end

    async def run(self) -> JobEnd:
        """Run the task to its end; its cluster is gone by then, whatever ends it."""
        try:
            end = await self._run()
        except workflow.ContinueAsNewError:
            raise  # the next run carries on with the cluster (``running``)
        except asyncio.CancelledError:
            by_sibling = workflow.cancellation_reason() is None
            self._stop_clock()
            self._close_attempt("cancelled" if self.stopped_with is None else "stopped")
            self._set(ManagedJobStatus.CANCELLING)
            await self._remove()
            if not by_sibling:
                raise
            # Within its parallel group: stopped once the primary tasks ended (``stop``), or
            # cancelled because a sibling failed; the job goes on.
            end = self.stopped_with or JobEnd(
                status=ManagedJobStatus.CANCELLED,
                reason=EndReason.EARLIER_TASK,
                message="cancelled: another task of its parallel group failed",
            )
        except BaseException:
            await self._remove()
            raise
        await self._remove()
        return end

    async def _run(self) -> JobEnd:
        running, self._running = self._running, None
        while True:
            try:
                if running is not None:
                    self.handle = handle = running.handle
                else:
                    last = self.state.attempts[-1] if self.state.attempts else None
                    if not self.request.parallel:
                        self._continue_as_new(None)  # a safe point: the task holds no cluster
                    handle = await self._bring_up(searches_for(last, self.policy, self.task.resources))
                return await self._use(handle, followed=running is not None)
            except _Ended as ended:
                return ended.end
            except _Recover:
                running = None
                continue

    # -- bringing a cluster up -------------------------------------------------------------------

    async def _bring_up(self, searches: list[Search]) -> ClusterHandle:
        """A new cluster for the task: each search in turn; the last one waits for capacity."""
        state = self.state
        recovering = any(attempt.ended_at is not None for attempt in state.attempts)
        attempt = self._open_attempt()
        self._set(ManagedJobStatus.RECOVERING if recovering else ManagedJobStatus.STARTING)
        resumed, self._resume_provision = self._resume_provision, None
        for number, search in enumerate(searches, 1):
            final = number == len(searches)
            if resumed is not None and not final:
                continue  # a run that continued as new while the last search waited resumes that one
            spec = ProvisionSpec(
                cluster_name=state.cluster_name,
                task=self.task,
                minimize=self.request.minimize,
                blocklist=search.blocklist,
                pin=search.pin,
                retry_until_up=final,
                max_searches=self.request.max_searches if final else None,
                attempt_scope=f"{workflow.info().workflow_id}/task-{state.index}/attempt-{attempt.number}/search-{number}",
            )
            provisioner = Provisioner(
                spec,
                resumed,
                enter=self._searching,
                waiting=self._waiting,
                between_searches=self._between_searches,
            )
            try:
                provisioned = await provisioner.provision()
            except (ActivityError, ApplicationError) as exc:
                raise_if_cancelled_by(exc)
                end = self._no_cluster(exc, final=final, ever_up=recovering)
                if end is None:
                    continue
                raise _Ended(end) from exc
            finally:
                state.waiting = state.retry_at = None
            self.handle = handle = provisioned.handle
            attempt.location = handle.offering.location
            attempt.provider, attempt.region = handle.offering.provider, handle.offering.region
            return handle
        raise AssertionError("the last search either brings a cluster up or ends the task")

    def _no_cluster(
        self, exc: ActivityError | ApplicationError, *, final: bool, ever_up: bool
    ) -> JobEnd | None:
        """How a search that found no cluster ends the task; None: go on to the next search."""
        cause = exc.cause if isinstance(exc, ActivityError) else exc
        if not isinstance(cause, ApplicationError):
            raise exc
        if cause.type == ErrorType.NO_FEASIBLE_OFFERING and (final or not ever_up):
            # A relaunch that its blocklist leaves no candidate searches everywhere next.
            return self._end_attempt_with(
                ManagedJobStatus.FAILED_PRECHECKS, EndReason.PRECHECKS, cause.message, "no feasible offering"
            )
        if cause.type == ErrorType.PROVISION_FAILED:
            return self._end_attempt_with(
                ManagedJobStatus.FAILED_PRECHECKS, EndReason.PRECHECKS, cause.message, "request refused"
            )
        if cause.type == ErrorType.NO_FEASIBLE_OFFERING or not final:
            return None
        if cause.type == ErrorType.RESOURCES_UNAVAILABLE:
            searches = self.request.max_searches
            message = f"no cluster could be brought up in {searches} searches (max_searches): {cause.message}"
            return self._end_attempt_with(
                ManagedJobStatus.FAILED_NO_RESOURCE, EndReason.NO_RESOURCE, message, "no capacity"
            )
        raise exc

    def _searching(self, stage: LaunchStage) -> None:
        """A search begins (again, after a wait): the task is starting, no longer waiting."""
        raise_if_cancelled()
        if stage == LaunchStage.OPTIMIZE and self.state.status == ManagedJobStatus.PENDING:
            self._set(ManagedJobStatus.STARTING)

    def _waiting(self, provision: ProvisionState) -> None:
        """Every candidate failed: wait for capacity, saying what failed and until when."""
        state = self.state
        tried = provision.earlier_attempts + len(provision.attempts)
        state.retry_at = provision.retry_at
        state.waiting = (
            f"no capacity: {tried} attempts failed in {provision.searches} searches; searching again at "
            f"{_when(provision.retry_at)}:\n{history_table(provision.attempts[-5:])}"
        )
        if state.status == ManagedJobStatus.STARTING:
            self._set(ManagedJobStatus.PENDING)

    def _between_searches(self, provision: ProvisionState) -> None:
        if not self.request.parallel:
            self._continue_as_new(provision)

    # -- using a cluster -------------------------------------------------------------------------

    async def _use(self, handle: ClusterHandle, *, followed: bool = False) -> JobEnd:
        """Setup, then runs on this cluster until the task ends or must recover elsewhere;
        ``followed``: the first run was started, and followed by its hub, before the job continued as new."""
        attempt = self.state.attempts[-1]
        if not followed:
            await self._set_up(handle)
        if self.task.run is None:
            return self._end_attempt_with(
                ManagedJobStatus.SUCCEEDED, EndReason.SUCCEEDED, "set up; the task has no run", "succeeded", 0
            )
        if not followed:
            await self._group_ready(handle)
        while True:
            outcome, told = await self._run_once(handle, self.state.attempts[-1], followed=followed)
            followed = False
            succeeded = outcome.status == NodeJobStatus.SUCCEEDED
            answered = outcome.exit_code is not None and outcome.lost_rank is None
            preempted = not succeeded and (
                nodes_lost(told) if told is not None else await self._preempted(handle, answered=answered)
            )
            decision = verdict(succeeded, preempted, outcome.exit_code, self.policy, self.state.restarts)
            if decision == Verdict.SUCCEEDED:
                return self._end_attempt_with(
                    ManagedJobStatus.SUCCEEDED, EndReason.SUCCEEDED, "succeeded", "succeeded", 0
                )
            failure = _failure(outcome)
            if decision == Verdict.RECOVER:
                await self._recover(PREEMPTED if preempted else f"{failure}, recovering on a new cluster")
            if decision == Verdict.FAILED:
                allowed = self.policy.max_restarts_on_errors
                restarts = (
                    f"after {allowed} restart(s) (max_restarts_on_errors: {allowed})"
                    if allowed
                    else "with no restart allowed (max_restarts_on_errors: 0)"
                )
                message = f"the run {failure} {restarts}"
                return self._end_attempt_with(
                    ManagedJobStatus.FAILED, EndReason.EXIT_CODE, message, failure, outcome.exit_code
                )
            self.state.restarts += 1
            self._close_attempt(f"{failure}, restarted")
            self._open_attempt(location=attempt)
            self._set(ManagedJobStatus.RECOVERING)

    async def _set_up(self, handle: ClusterHandle) -> None:
        """Ready the new cluster's nodes (sync, mounts, setup); a setup that failed ends the task,
        unless the provider says the nodes were taken (then the task recovers)."""
        attempt = self.state.attempts[-1]
        key = f"{workflow.info().workflow_id}-{self.state.index}-{attempt.number}"
        try:
            await prepare_nodes(handle, self.task, setup_key(key), mounts=self._mounts, timeout=_LONG_TIMEOUT)
            raise_if_cancelled()
        except ActivityError as exc:
            raise_if_cancelled_by(exc)
            # A setup fails too when its node is taken (its record vanishes): ask the provider,
            # unless the nodes themselves reported the setup's exit code.
            if await self._preempted(handle, answered=_setup_exit_code(exc) is not None):
                await self._recover(PREEMPTED)
            end = self._end_attempt_with(
                ManagedJobStatus.FAILED_SETUP, EndReason.SETUP, innermost_message(exc), "setup failed"
            )
            raise _Ended(end) from exc

    async def _group_ready(self, handle: ClusterHandle) -> None:
        """In a parallel group, the first runs start only once every cluster of the group is up."""
        group = self._group
        if group is None:
            return
        group.handles[self.state.index] = (self.task.name, handle)
        await workflow.wait_condition(lambda: group.started or len(group.handles) == group.size)
        group.started = True

    async def _run_once(
        self, handle: ClusterHandle, attempt: TaskAttempt, *, followed: bool = False
    ) -> tuple[JobOutcome, list[NodeStatus] | None]:
        """Start the attempt's run (unless an earlier run of the job did: ``followed``) and wait
        for its end (a signal from the job's watch hub); with the provider's view of the nodes if
        the hub asked it (``RunEnded.node_statuses``)."""
        owner = workflow.info().workflow_id
        run = FollowedRun(
            key=run_key(owner, self.state.index, attempt.number),
            owner=owner,
            handle=handle,
            job=WatchedJob(job_id=attempt.number, nodes=list(range(self.task.num_nodes)), running=True),
            log=AttemptLog(job_id=self.request.job_id, task_index=self.state.index, attempt=attempt.number),
        )
        continue_running = self._continue_running
        try:
            ended = await self._ends.end_of(
                run,
                watch_hub_shard(self.request.job_id),
                start=None if followed else lambda follow: self._start(handle, attempt, follow),
                idle=None
                if continue_running is None
                else lambda came: continue_running(RunningAttempt(handle=handle, key=run.key), came),
            )
        except ActivityError as exc:
            raise_if_cancelled_by(exc)
            ended = RunEnded(
                key=run.key, outcome=JobOutcome(status=NodeJobStatus.FAILED, error=innermost_message(exc))
            )
        # Not in a ``finally``: a workflow evicted from the worker closes this coroutine, which must
        # not touch workflow state then.
        self._stop_clock()
        return ended.outcome, ended.node_statuses

    async def _start(
        self, handle: ClusterHandle, attempt: TaskAttempt, follow: FollowRunInput | None
    ) -> JobOutcome | None:
        """Start the attempt's run on the nodes; None once it started (the task is RUNNING then),
        else how it failed. With ``follow``, one activity also has the run's hub follow it and sends
        the job's row, which says RUNNING from before the start (``start_managed_run``)."""
        task = self.task
        if self._group is not None:
            task = self._group.task_on(handle, task)
        job = JobRecord(
            job_id=attempt.number,
            name=task.name,
            user=self.request.user,
            request_id=f"{workflow.info().workflow_id}/{self.state.index}/{attempt.number}",
            submitted_at=workflow.now().timestamp(),
            status=JobStatus.SETTING_UP,
            num_nodes=task.num_nodes,
            task_id=self.state.task_id,
        )
        start = RunJobInput(
            handle=handle, job=job, task=task, flush_cached_mounts=cluster_storage(self._mounts).cached
        )
        activity: Any = jobs.start_job
        arg: RunJobInput | ManagedRunStart = start
        if follow is not None:
            self._now_running()
            activity = jobs.start_managed_run
            arg = ManagedRunStart(start=start, follow=follow, report=self._take_report())
        try:
            await run_long(activity, arg, timeout=_LONG_TIMEOUT, summary=f"start attempt {attempt.number}")
            raise_if_cancelled()
        except ActivityError as exc:
            raise_if_cancelled_by(exc)
            return JobOutcome(status=NodeJobStatus.FAILED, error=innermost_message(exc))
        if follow is None:
            self._now_running()
        return None

    def _now_running(self) -> None:
        self.state.running_since = workflow.now().timestamp()
        self._set(ManagedJobStatus.RUNNING)

    async def _preempted(self, handle: ClusterHandle, *, answered: bool) -> bool:
        """Whether the provider says the nodes are gone; asked until it answers, on a backoff timer.

        ``answered``: the nodes themselves reported the run's end, so a provider that cannot tell
        its nodes' state at all (an SSH pool) is not waited for: they were up.
        """
        state, provider = self.state, handle.offering.provider
        failures = 0
        while True:
            try:
                statuses = await node_statuses(handle)
                if statuses is not None or answered:
                    state.waiting = state.retry_at = None
                    return statuses is not None and nodes_lost(statuses)
                reason = f"{provider} cannot tell whether the nodes are up"
            except ActivityError as exc:
                raise_if_cancelled_by(exc)
                reason = f"could not ask {provider} whether the nodes are up ({innermost_message(exc)})"
            failures += 1
            delay = min(_PROBE_FIRST * 2 ** (failures - 1), _PROBE_MAX)
            state.retry_at = workflow.now().timestamp() + delay.total_seconds()
            state.waiting = f"the run ended; {reason}: asking again at {_when(state.retry_at)}"
            await workflow.sleep(delay)

    async def _recover(self, outcome: str) -> None:
        """Leave this cluster for a new one (the activity that removes it sends the job's RECOVERING
        row, when the job hands it over): the caller searches again."""
        self.state.recoveries += 1
        self._close_attempt(outcome)
        self._set(ManagedJobStatus.RECOVERING)
        await self._remove(self._take_report())
        raise _Recover()

    async def _remove(self, report: JobIndexRow | None = None) -> None:
        """Remove the task's cluster, if it holds one (a cancellation waits for the removal)."""
        handle, self.handle = self.handle, None
        if handle is not None:
            await remove_nodes(handle, f"tear down {handle.offering.location}", report=report)


class _Recover(Exception):
    """The task left its cluster for a new one."""


def _failure(outcome: JobOutcome) -> str:
    """``exited with code 3 on node 1``, ``was cancelled``, or the error, for messages and outcomes."""
    if outcome.exit_code is not None:
        where = f" on node {outcome.failed_rank}" if outcome.failed_rank else ""
        return f"exited with code {outcome.exit_code}{where}"
    if outcome.status == NodeJobStatus.CANCELLED:
        return "was stopped on its node"
    return f"failed ({outcome.error})" if outcome.error else "failed"


def _setup_exit_code(exc: ActivityError) -> int | None:
    """The exit code a failed setup reported from its node; None: not a setup failure, or no exit there."""
    cause = exc.cause
    if not isinstance(cause, ApplicationError) or cause.type != ErrorType.SETUP_FAILED or not cause.details:
        return None
    outcome = JobOutcome.model_validate(cause.details[0])
    return outcome.exit_code if outcome.lost_rank is None else None


def _when(timestamp: float | None) -> str:
    return datetime.fromtimestamp(timestamp or 0, UTC).isoformat(timespec="seconds")
