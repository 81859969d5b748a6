"""A managed job's output from the store, every attempt in order, and its status as it changes.

The job's watch hub ships each attempt's output to the store (``storage.logs.attempt_stream``) as
it runs, so nothing here touches the job's nodes (a preempted node is gone, its output is not) or a
worker's disk. The ``state`` query says which attempts there are, where each ran and how it ended.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, BinaryIO

from skyhop.cli.output import info
from skyhop.contract.managed_jobs import ManagedJobState, ManagedTaskState, TaskAttempt

if TYPE_CHECKING:
    from temporalio.client import Client

    from skyhop.storage.logs import LogReader

__all__ = ["AttemptLogs", "StatusPrinter", "follow_job", "job_state", "print_logs", "recovery_marker"]

_STATE_EVERY_S = 1.0
"""How often a follower asks the job's state (the log files are read more often)."""


async def job_state(client: Client, job_id: int) -> ManagedJobState:
    """The job's ``state`` query; ``JobNotFoundError`` when there is no such job."""
    from temporalio.service import RPCError

    from skyhop.cli.failures import asked_again, is_not_found
    from skyhop.cli.logs import JobNotFoundError
    from skyhop.contract.job_index import ManagedJobQuery, managed_job_workflow_id

    handle = client.get_workflow_handle(managed_job_workflow_id(job_id))
    try:
        state: ManagedJobState = await asked_again(
            lambda: handle.query(ManagedJobQuery.STATE, result_type=ManagedJobState)
        )
    except RPCError as exc:
        if not is_not_found(exc):
            raise
        raise JobNotFoundError(f"no managed job {job_id}; see: skyhop jobs queue") from None
    return state


def recovery_marker(attempt: TaskAttempt, previous: TaskAttempt) -> str:
    """The line ``jobs logs`` prints before an attempt after the first."""
    where = attempt.location or "a new cluster"
    return (
        f"--- recovery {attempt.number - 1}: attempt {attempt.number} on {where} "
        f"(previous attempt: {previous.outcome or 'ended'}) ---"
    )


class AttemptLogs:
    """Writes every attempt's output in order (task, then attempt), each once, as it grows.

    A cursor stays on one attempt until that attempt has ended and the next one is known (with
    where it runs, for its marker line); its file may not exist yet (nothing written so far). The
    cursor names its attempt (task index, attempt number), not a position: in a parallel group an
    earlier task can gain an attempt while a later one is being read (following shows the tasks one
    after the other; such an attempt is in the next ``jobs logs``).
    """

    def __init__(self, job_id: int, out: BinaryIO) -> None:
        from skyhop.storage.logs import log_store

        self.job_id = job_id
        self.out = out
        self.store = log_store()
        self.at: tuple[int, int] | None = None
        """The current attempt: its task's index and its number."""
        self.reader: LogReader | None = None
        """The current attempt's rank 0, as ``skyhop logs`` shows a job."""
        self.line_open = False
        """Whether the output so far ends inside a line (a marker then starts a new one)."""

    async def pump(self, state: ManagedJobState, *, to_end: bool = False) -> bool:
        """Write what is new; at the job's end (or ``to_end``), everything left. True if anything was."""
        to_end = to_end or state.status.done
        attempts = _attempts(state)
        keys = [(task.index, attempt.number) for task, attempt in attempts]
        wrote = False
        while attempts:
            if self.at is None:
                self._enter(state, *attempts[0])
            assert self.at is not None
            position = keys.index(self.at)
            wrote = await self._copy() or wrote
            following = position + 1
            if following >= len(attempts) or not (
                to_end or _may_leave(attempts[position][1], attempts[following][1])
            ):
                break
            self._enter(state, *attempts[following])
        self.out.flush()
        return wrote

    def _enter(self, state: ManagedJobState, task: ManagedTaskState, attempt: TaskAttempt) -> None:
        order = task.attempts.index(attempt)
        if order == 0 and len(state.tasks) > 1:
            number = state.tasks.index(task) + 1
            self._line(f"--- task {number} of {len(state.tasks)}{f': {task.name}' if task.name else ''} ---")
        elif order > 0:
            self._line(recovery_marker(attempt, task.attempts[order - 1]))
        from skyhop.storage.logs import LogReader, attempt_stream

        self.at = (task.index, attempt.number)
        stream = attempt.log_stream or attempt_stream(self.job_id, task.index, attempt.number)
        self.reader = LogReader(self.store, stream, 0)

    def _line(self, text: str) -> None:
        self.out.write((b"\n" if self.line_open else b"") + text.encode() + b"\n")
        self.line_open = False

    async def _copy(self) -> bool:
        assert self.reader is not None
        reader, wrote = self.reader, False
        while chunk := await asyncio.to_thread(reader.read):
            self.out.write(chunk)
            self.line_open = not chunk.endswith(b"\n")
            wrote = True
        return wrote


def _may_leave(current: TaskAttempt, upcoming: TaskAttempt) -> bool:
    """Whether a follower may go on to the next attempt: this one has ended, and the next one's
    place is known (or it ended before it had one)."""
    return current.ended_at is not None and (upcoming.location is not None or upcoming.ended_at is not None)


def _attempts(state: ManagedJobState) -> list[tuple[ManagedTaskState, TaskAttempt]]:
    return [(task, attempt) for task in state.tasks for attempt in task.attempts]


class StatusPrinter:
    """``jobs launch``'s lines on stderr: each status change, why a task waits, each recovery."""

    def __init__(self) -> None:
        self.status: str | None = None
        self.waiting: dict[int, str | None] = {}
        self.attempts: dict[int, int] = {}

    def show(self, state: ManagedJobState) -> None:
        if state.status != self.status:
            self.status = state.status
            info(f"Managed job {state.job_id} ({state.name}): {state.status.value}")
        for task in state.tasks:
            label = f"task {task.index}: " if len(state.tasks) > 1 else ""
            shown = self.attempts.get(task.index, 1)
            for previous, attempt in zip(task.attempts, task.attempts[1:], strict=False):
                if attempt.number > shown:
                    info(f"  {label}recovering: {previous.outcome or 'ended'}; attempt {attempt.number}")
                    shown = attempt.number
            self.attempts[task.index] = shown
            if task.waiting != self.waiting.get(task.index):
                self.waiting[task.index] = task.waiting
                if task.waiting:
                    retry = (
                        f" (next try in {max(task.retry_at - time.time(), 0):.0f}s)" if task.retry_at else ""
                    )
                    info(f"  {label}waiting: {task.waiting}{retry}")
        if state.status.done and state.end is not None:
            info(f"Managed job {state.job_id} {state.end.status.value}: {state.end.message}")


async def print_logs(client: Client, job_id: int, out: BinaryIO | None = None) -> ManagedJobState:
    """``jobs logs ID``: every attempt's output so far, in order, with its recovery markers."""
    state = await job_state(client, job_id)
    if not any(task.attempts for task in state.tasks):
        info(f"Managed job {job_id} is {state.status.value}: it has not run yet, so it has no output.")
    await AttemptLogs(job_id, out or sys.stdout.buffer).pump(state, to_end=True)
    return state


async def follow_job(
    client: Client,
    job_id: int,
    *,
    out: BinaryIO | None = None,
    on_state: Callable[[ManagedJobState], None] = lambda state: None,
) -> ManagedJobState:
    """Stream the job's output as it is written until the job ends; its final state."""
    logs = AttemptLogs(job_id, out or sys.stdout.buffer)
    state = await job_state(client, job_id)
    asked, poll = time.monotonic(), 0.05
    while True:
        on_state(state)
        wrote = await logs.pump(state)
        if state.status.done:
            return state
        poll = 0.05 if wrote else min(poll * 1.5, 0.5)
        await asyncio.sleep(poll)
        if time.monotonic() - asked >= _STATE_EVERY_S:
            state, asked = await job_state(client, job_id), time.monotonic()
