"""``ManagedJobWorkflow``: a managed job, run to its end through preemptions and failures.

One workflow per job (id ``managed-job:<id>``), no controller process: each task is a
``workflows.managed_task.ManagedTask`` on a dedicated cluster it brings up and removes itself.
A pipeline runs its tasks in order (a failure ends the rest CANCELLED, reason EARLIER_TASK); a
parallel group runs them at once (every cluster up before any run starts, each run told the
others' addresses) and a failure of one cancels the others. A group with ``primary_tasks``
(SkyPilot's job groups) ends with its primary tasks: once they all ended, each other (auxiliary)
task is stopped after its ``termination_delay``, a durable timer, through the same cancellation
that removes its cluster; the job's status is then the primary tasks'.

The job's status is the ``state`` query (``ManagedJobState``), the ``SkyhopStatus`` search
attribute and its row in the job index (``JobIndexWorkflow``, which ``jobs queue`` reads), written
on a status change only (a pipeline task's RUNNING reaches the attribute with the continue-as-new
that follows its start), so a running job writes nothing to its history; the workflow ends only
once its last report reached the index. The memo's ``ManagedJobSummary`` is written when the job
starts and when it ends: each write is a visibility update, the dev server's costliest write, and
at 10,000 jobs a memo written on every change doubled them. Cancelled (Temporal's cancel),
every task removes its cluster, and the workflow completes CANCELLED with the final state, as every
end does. Between clusters (or while it waits for capacity) a job whose history is long continues
as new, carrying its state, and so does a pipeline job once its task's run is followed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta

from temporalio import workflow
from temporalio.common import SearchAttributePair

with workflow.unsafe.imports_passed_through():
    from skyhop.activities.job_index import index_job_row
    from skyhop.contract import JOB_ENDED_SIGNAL, SHORT_QUEUE, WorkflowKind, WorkflowType
    from skyhop.contract.clusters import JobEnded, ProvisionState
    from skyhop.contract.job_index import (
        MEMO_KEY,
        JobIndexRow,
        ManagedJobQuery,
        ManagedJobStatus,
        ManagedJobSummary,
    )
    from skyhop.contract.managed_jobs import (
        EndReason,
        JobEnd,
        ManagedJobRequest,
        ManagedJobResume,
        ManagedJobState,
        ManagedTaskState,
        RunningAttempt,
        job_resources,
        managed_cluster_name,
        managed_task_id,
    )
    from skyhop.contract.pools import PoolSignal, WorkerAssigned
    from skyhop.contract.search import KIND, NAME, STATUS, USER
    from skyhop.contract.watch_hub import RUN_ENDED_SIGNAL, RunEnded
    from skyhop.workflows.auxiliary_stops import AuxiliaryStops, auxiliary_end
    from skyhop.workflows.changes import Changes
    from skyhop.workflows.managed_task import Group, ManagedTask
    from skyhop.workflows.options import LONG_RETRY
    from skyhop.workflows.pool_job import PoolInbox, PoolJob
    from skyhop.workflows.stages import history_is_long
    from skyhop.workflows.watch_hub import RunEnds

__all__ = ["ManagedJobWorkflow"]

_LIVE_ORDER = (
    ManagedJobStatus.CANCELLING,
    ManagedJobStatus.RECOVERING,
    ManagedJobStatus.STARTING,
    ManagedJobStatus.RUNNING,
)
"""A job whose tasks are in several of these states shows the first (then PENDING)."""

_CONTINUE_WHILE_RUNNING = "continue-while-running"
"""A pipeline job continues as new once its task's run is followed (``_continue_while_running``)."""

_MEMO_AT_ENDS = "memo-at-start-and-end"
"""The memo is written when the job starts and ends, not on every status change."""

_ONE_REPORT_AT_A_TIME = "one-index-report-at-a-time"
"""Rows go to the job index one at a time, the newest waiting one next: the rows of one workflow
task (PENDING then STARTING at a launch) are one report, not one activity and one workflow task each."""

_BASELINE = "managed-job-baseline-1"
"""Asked once per run (``workflows.changes``): stands for every change above and ``RunEnds``'s
(``workflows.watch_hub``), and came with the end's search attribute and memo written
in the workflow task that completes the job (the server skips a visibility update whose workflow
has closed, and the close record carries both: a job's end costs one visibility write, not three),
and with local activities for the reports of a job's end (``_send``) and the hub's ``forget``
(``RunEnds``): a cancel is two workflow tasks, not five. The search attribute skips CANCELLING
(the index and the ``state`` query show it): a cancel lasts as long as its cluster's removal, and
that visibility write was a third of a cancel's cost on the dev server's SQLite, whose visibility
writes (a close, 36 ms under a thousand cancels) bound how many jobs end a second."""

_START_FOLLOWS = "managed-job-baseline-2"
"""Stands for ``_BASELINE`` and: one activity starts a run, has its hub follow it and sends the
job's RUNNING row (``activities.jobs.start_managed_run``; ``RunEnds``'s ``start_follows``), and
the task is RUNNING from before it; the activity that removes a cluster the job leaves to recover
sends its RECOVERING row (``activities.jobs.leave_cluster``); a pipeline task's RUNNING goes to
the search attribute with the continue-as-new that follows (``_continues_with``). A relaunch was
seven workflow tasks and six activities; the follow and the two reports were three of each."""


@workflow.defn(name=WorkflowType.MANAGED_JOB)
class ManagedJobWorkflow:
    @workflow.init
    def __init__(self, request: ManagedJobRequest) -> None:
        self.request = request
        self._state = request.resume.state if request.resume is not None else _first_state(request)
        self._published: ManagedJobStatus | None = None
        self._attribute_owed: ManagedJobStatus | None = None
        """A status the search attribute has not been given: the continue-as-new that follows a
        pipeline task's start gives it to the next run (``_START_FOLLOWS``)."""
        self._reports: list[workflow.ActivityHandle[None]] = []
        """Reports of a run from before ``_ONE_REPORT_AT_A_TIME``: one activity per row."""
        self._unsent: JobIndexRow | None = None
        self._sender: asyncio.Task[None] | None = None
        self._changes = Changes(
            _BASELINE, _START_FOLLOWS, carried=request.resume.baseline if request.resume is not None else None
        )
        self._start_follows = self._changes.since(_START_FOLLOWS)
        running = request.resume.running if request.resume is not None else None
        self._run_ends = RunEnds(
            self._changes,
            awaited=running.key if running is not None else None,
            start_follows=self._start_follows,
        )
        self._pool_inbox = PoolInbox()

    @workflow.signal(name=PoolSignal.WORKER_ASSIGNED)
    def worker_assigned(self, assigned: WorkerAssigned) -> None:
        """A pool job's pool gives it a worker (``workflows.pool_job``)."""
        self._pool_inbox.worker_assigned(assigned)

    @workflow.signal(name=JOB_ENDED_SIGNAL)
    def job_ended(self, ended: JobEnded) -> None:
        """A pool job's run on its worker's cluster ended, says the cluster."""
        self._pool_inbox.job_ended(ended)

    @workflow.signal(name=RUN_ENDED_SIGNAL)
    def run_ended(self, ended: RunEnded) -> None:
        """A task's run ended, says its watch hub (at least once: ``RunEnds`` handles it once)."""
        self._run_ends.receive(ended)

    @workflow.query(name=ManagedJobQuery.STATE)
    def state(self) -> ManagedJobState:
        """Where the job stands: each task's status, attempts, recoveries and why it waits."""
        return self._state

    @workflow.run
    async def run(self, request: ManagedJobRequest) -> ManagedJobState:
        if request.resume is not None and request.resume.running is not None:
            # Continued while running, once every report was in: the attribute and the row are current.
            self._published = self._state.status
        else:
            self._publish(identify=True)
        try:
            if request.parallel:
                await self._run_group()
            else:
                await self._run_pipeline()
        except asyncio.CancelledError:
            # Every task removed its cluster before the cancellation reached here.
            for task in self._state.tasks:
                if not task.status.done:
                    self._end_task(
                        task,
                        JobEnd(
                            status=ManagedJobStatus.CANCELLED,
                            reason=EndReason.CANCELLED,
                            message="cancelled by the user; "
                            + (
                                f"its worker went back to pool {request.pool}"
                                if request.pool is not None
                                else "its cluster was removed"
                            ),
                        ),
                    )
        self._finish()
        # The end is in the index before the workflow ends.
        await asyncio.gather(*self._reports, *([self._sender] if self._sender is not None else []))
        if self._changes.baseline:
            self._upsert(identify=False)  # no await from here: the workflow completes in this task
        return self._state

    async def _run_pipeline(self) -> None:
        resume = self.request.resume
        provision = resume.provision if resume is not None else None
        running = resume.running if resume is not None else None
        for task in self._state.tasks:
            if task.status.done:
                continue
            runner: ManagedTask | PoolJob = (
                PoolJob(self.request, task, self._publish, self._pool_inbox)
                if self.request.pool is not None
                else ManagedTask(
                    self.request,
                    task,
                    self._publish,
                    self._run_ends,
                    provision=provision,
                    running=running,
                    continue_as_new=self._continue_if_long,
                    continue_running=self._continue_while_running,
                    take_report=self._take_unsent if self._start_follows else lambda: None,
                )
            )
            provision = running = None
            end = await runner.run()
            self._end_task(task, end)
            if end.status != ManagedJobStatus.SUCCEEDED:
                self._end_rest(task)
                return

    async def _run_group(self) -> None:
        group = Group(len(self._state.tasks), self.request.group)
        runners = [
            ManagedTask(self.request, task, self._publish, self._run_ends, group=group)
            for task in self._state.tasks
        ]
        runs = {asyncio.create_task(runner.run()): runner for runner in runners}
        pending = list(runs)  # a list: cancelling in a set's order would not replay deterministically
        stops: AuxiliaryStops[asyncio.Task[JobEnd]] = AuxiliaryStops()
        failed = False
        try:
            while pending:
                now = workflow.now().timestamp()
                for run, delay in stops.due(now):
                    runs[run].stop(auxiliary_end(delay))
                    run.cancel()  # it ends CANCELLED (PRIMARY_TASKS_ENDED) once its cluster is gone
                # A durable timer while a stop is due; none otherwise (a group without primary_tasks).
                done, pending = await workflow.wait(
                    pending, timeout=stops.next_in(now), return_when=asyncio.FIRST_COMPLETED
                )
                for run in done:
                    end = run.result()
                    stops.forget(run)
                    self._end_task(runs[run].state, end)
                    if end.status != ManagedJobStatus.SUCCEEDED and not stops.scheduled:
                        failed = True
                        for other in pending:
                            other.cancel()  # each ends CANCELLED (EARLIER_TASK) once its cluster is gone
                if (
                    pending
                    and not failed
                    and not stops.scheduled
                    and all(t.status.done for t in self._primaries())
                ):
                    group_fields = self.request.group
                    assert group_fields is not None  # auxiliary tasks exist only under primary_tasks
                    delays = [(run, group_fields.delay_seconds(runs[run].state.name)) for run in pending]
                    stops.schedule(delays, workflow.now().timestamp())
        except BaseException:
            # Cancelled, or a task failed unexpectedly: no other task may keep its cluster.
            for run in pending:
                run.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            raise

    def _primaries(self) -> list[ManagedTaskState]:
        return [task for task in self._state.tasks if task.primary]

    def _end_task(self, task: ManagedTaskState, end: JobEnd) -> None:
        task.end, task.waiting, task.retry_at = end, None, None
        task.status = end.status
        self._publish()

    def _end_rest(self, failed: ManagedTaskState) -> None:
        """A pipeline task failed: the ones after it never run."""
        name = f" ({failed.name})" if failed.name else ""
        for task in self._state.tasks[failed.index + 1 :]:
            self._end_task(
                task,
                JobEnd(
                    status=ManagedJobStatus.CANCELLED,
                    reason=EndReason.EARLIER_TASK,
                    message=f"not run: task {failed.index}{name} before it ended {failed.status}",
                ),
            )

    def _finish(self) -> None:
        state = self._state
        state.end = _job_end(state.tasks)
        state.status = state.end.status
        state.ended_at = workflow.now().timestamp()
        self._publish()

    def _continue_if_long(self, provision: ProvisionState | None) -> None:
        """At a point where no cluster is held: continue as new once the history is long."""
        if history_is_long(self.request.history_limit):
            resume = ManagedJobResume(state=self._state, provision=provision, baseline=self._changes.carry())
            workflow.continue_as_new(self.request.model_copy(update={"resume": resume}))

    async def _continue_while_running(self, running: RunningAttempt, came: Callable[[], bool]) -> None:
        """A pipeline task's run is followed: once its reports are in the index, continue as new
        (unless its end ``came`` meanwhile), so the job's history while it runs is a few events.
        A worker that evicted the job replays those, not every event since the job began, to
        handle its end or its cancel (at 10,000 jobs, every job was evicted)."""
        if not self._changes.has(_CONTINUE_WHILE_RUNNING):
            return
        await workflow.wait_condition(lambda: came() or self._reported())
        if not came():
            resume = ManagedJobResume(state=self._state, running=running, baseline=self._changes.carry())
            owed = self._attribute_owed
            attributes = (
                None
                if owed is None
                else workflow.info().typed_search_attributes.updated(SearchAttributePair(STATUS, owed.value))
            )
            workflow.continue_as_new(
                self.request.model_copy(update={"resume": resume}), search_attributes=attributes
            )

    def _reported(self) -> bool:
        """Whether every row sent to the job index has landed."""
        sending = [*self._reports, *([self._sender] if self._sender is not None else [])]
        return all(report.done() for report in sending)

    def _publish(self, *, identify: bool = False) -> None:
        """Write the status to the search attribute and the index (and the memo at the job's start
        and end), when it changed (and at a run's start); the end's attribute and memo are written
        as the workflow completes, and the attribute skips CANCELLING (``_BASELINE``)."""
        state = self._state
        if not state.status.done:
            # Once a group's primary tasks have ended, its auxiliary tasks being stopped do not
            # make the job CANCELLING: it stays as it was until ``_finish``.
            primaries = self._primaries()
            counted = primaries if all(task.status.done for task in primaries) else state.tasks
            live = [task.status for task in counted]
            if all(status.done for status in live) and not identify:
                return  # ``_finish`` publishes the job's end
            state.status = next((s for s in _LIVE_ORDER if s in live), ManagedJobStatus.PENDING)
        if state.status == self._published and not identify:
            return
        self._published = state.status
        self._attribute_owed = None
        if self._continues_with(state.status) and not identify:
            self._attribute_owed = state.status
        elif not (self._changes.baseline and _ending(state.status)):
            self._upsert(identify=identify)
        workflow.set_current_details(f"status: {state.status}")
        self._report(state.summary())

    def _continues_with(self, status: ManagedJobStatus) -> bool:
        """Whether the run's continue-as-new, which comes next, writes ``status`` to the search
        attribute: a pipeline task's RUNNING (``_continue_while_running``; if its run ends first, the
        next status is written instead). A visibility write, the dev server's costliest kind, and
        an event fewer per launch and relaunch."""
        return (
            status == ManagedJobStatus.RUNNING
            and not self.request.parallel
            and self.request.pool is None
            and self._start_follows
        )

    def _upsert(self, *, identify: bool) -> None:
        """The status search attribute (and the job's identity at its start; the memo at its start
        and end)."""
        state = self._state
        updates = [STATUS.value_set(state.status.value)]
        if identify:
            attributes = workflow.info().typed_search_attributes
            if attributes.get(KIND) != WorkflowKind.MANAGED_JOB:
                updates.append(KIND.value_set(WorkflowKind.MANAGED_JOB.value))
            if attributes.get(NAME) is None:
                updates.append(NAME.value_set(self.request.name))
            if attributes.get(USER) is None:
                updates.append(USER.value_set(self.request.user))
        workflow.upsert_search_attributes(updates)
        if identify or state.status.done or not self._changes.has(_MEMO_AT_ENDS):
            workflow.upsert_memo({MEMO_KEY: state.summary()})

    def _report(self, summary: ManagedJobSummary) -> None:
        """Send the new row to the job index, without waiting; a row still unsent when a newer one
        comes is replaced by it. The sequence number (``published``) makes the shard keep the newest
        of the reports that land (those of a run before ``_ONE_REPORT_AT_A_TIME`` may land out of
        order). A report in flight at a continue-as-new is sent again by the next run's first
        ``_publish``."""
        self._state.published += 1
        row = JobIndexRow(summary=summary, user=self.request.user, seq=self._state.published)
        if not self._changes.has(_ONE_REPORT_AT_A_TIME):
            self._reports.append(self._send(row))
            return
        self._unsent = row
        if self._sender is None or self._sender.done():
            self._sender = asyncio.create_task(self._send_unsent())

    def _take_unsent(self) -> JobIndexRow | None:
        """The newest row not sent yet, which the caller's activity sends instead (a run's start)."""
        row, self._unsent = self._unsent, None
        return row

    async def _send_unsent(self) -> None:
        """Send the newest unsent row until none waits (a row replaced before it was sent is never sent)."""
        while self._unsent is not None:
            row, self._unsent = self._unsent, None
            await self._send(row)

    def _send(self, row: JobIndexRow) -> workflow.ActivityHandle[None]:
        if self._changes.baseline and _ending(row.summary.status):
            # A local activity: it runs in the workflow task that made the row, so a report costs
            # no activity task, no events of its own and no workflow task to hear it landed (a
            # cancel's two reports were two of its five workflow tasks). Only as the job ends: the
            # task is held until the row landed, and a relaunch decided in it (its cluster's
            # removal, its next provisioning) would wait for that too: at 10,000 jobs, 0.66 s more
            # from a preemption to its decision at the median.
            return workflow.start_local_activity(
                index_job_row,
                row,
                start_to_close_timeout=timedelta(seconds=60),
                retry_policy=LONG_RETRY,
            )
        return workflow.start_activity(
            index_job_row,
            row,
            task_queue=SHORT_QUEUE,
            # One signal-with-start, to a shard every job of a thousand reports to: in a burst
            # (hundreds of jobs starting or relaunching) it waits its turn on a busy server.
            # 10 s timed hundreds of reports out, each sent again on top of the burst.
            start_to_close_timeout=timedelta(seconds=60),
            retry_policy=LONG_RETRY,  # never given up: a busy server only delays the row
        )


def _ending(status: ManagedJobStatus) -> bool:
    """CANCELLING or an end: under ``_BASELINE``, no search attribute of its own, a local report."""
    return status.done or status == ManagedJobStatus.CANCELLING


def _first_state(request: ManagedJobRequest) -> ManagedJobState:
    submitted_at = request.submitted_at or workflow.now().timestamp()
    count = len(request.tasks)
    group = request.group
    return ManagedJobState(
        job_id=request.job_id,
        name=request.name,
        user=request.user,
        status=ManagedJobStatus.PENDING,
        submitted_at=submitted_at,
        resources=job_resources(request.tasks),
        tasks=[
            ManagedTaskState(
                index=index,
                name=task.name,
                primary=group is None or group.is_primary(task.name),
                cluster_name=managed_cluster_name(request.job_id, index, count),
                task_id=managed_task_id(submitted_at, request.name, request.job_id, index),
            )
            for index, task in enumerate(request.tasks)
        ],
    )


def _job_end(tasks: list[ManagedTaskState]) -> JobEnd:
    """The job's end from its tasks': a cancel, else the primary tasks' success (a job group's
    auxiliary tasks' ends do not count then), else the first failure, else success."""
    ends = [task.end for task in tasks if task.end is not None]
    for end in ends:
        if end.reason == EndReason.CANCELLED:
            return end
    primaries = [task for task in tasks if task.primary]
    if len(primaries) < len(tasks) and all(
        t.end is not None and t.end.status == ManagedJobStatus.SUCCEEDED for t in primaries
    ):
        names = ", ".join(task.name or str(task.index) for task in primaries)
        return JobEnd(
            status=ManagedJobStatus.SUCCEEDED,
            reason=EndReason.SUCCEEDED,
            message=f"the primary tasks ({names}) succeeded",
            exit_code=0,
        )
    for end in ends:
        if end.status != ManagedJobStatus.SUCCEEDED and end.reason not in _NOT_FAILURES:
            return end
    count = len(tasks)
    message = "succeeded" if count == 1 else f"all {count} tasks succeeded"
    return JobEnd(status=ManagedJobStatus.SUCCEEDED, reason=EndReason.SUCCEEDED, message=message, exit_code=0)


_NOT_FAILURES = (EndReason.EARLIER_TASK, EndReason.PRIMARY_TASKS_ENDED)
"""Ends that are another task's doing, never the job's end."""
