"""The managed-job part of the contract: ``ManagedJobWorkflow``, its input and its states.

A managed job is one workflow, id ``managed-job:<id>`` on ``skyhop-workflows``, started with a
``ManagedJobRequest`` as JSON. Its ``state`` query answers a ``ManagedJobState``; the summary a
listing needs is in its memo (``MEMO_KEY``, a ``ManagedJobSummary``) and its status in the
``SkyhopStatus`` search attribute, for the Web UI and any client's visibility queries, and in
its row of the job index (below), which ``jobs queue`` reads. Cancel it with Temporal's cancel:
it ends CANCELLED once its clusters are gone. Every end, cancel included, completes the workflow
with the final ``ManagedJobState`` as result.

A parallel group's runs see, besides the usual variables, ``SKYHOP_JOBGROUP_<NAME>_IPS`` (and
``SKYPILOT_JOBGROUP_<NAME>_IPS``) for every task of the group: its nodes' addresses, newline-separated
in rank order, ``<NAME>`` being the task's name upper-cased with other characters than letters and
digits as ``_`` (``TASK<index>`` for a task without a name); ``jobgroup_env_name`` spells it;
and the group's name as ``SKYHOP_JOBGROUP_NAME`` (``SKYPILOT_JOBGROUP_NAME``), the domain of the
``<task>-<rank>.<group>`` hostnames a group's runs add to their nodes (``JobGroup.hostnames``).
A group with ``primary_tasks`` (``ManagedJobRequest.group``) ends when those have ended: the
others are then stopped after their ``termination_delay``, ending CANCELLED with reason
PRIMARY_TASKS_ENDED, and the job's status is the primary tasks'.

Job ids, statuses, summaries, the ``state`` query's name and the job index (what ``jobs queue``
reads) are in ``contract.job_index``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, Field, model_validator

from skyhop.contract.clusters import ProvisionState
from skyhop.contract.job_index import ManagedJobStatus, ManagedJobSummary
from skyhop.providers.base import ClusterHandle
from skyhop.spec import JobGroup, Placement, Task

__all__ = [
    "MANAGED_CLUSTER_PATTERN",
    "EndReason",
    "JobEnd",
    "ManagedJobRequest",
    "ManagedJobResume",
    "ManagedJobState",
    "ManagedTaskState",
    "RunningAttempt",
    "TaskAttempt",
    "jobgroup_env_name",
    "job_resources",
    "managed_cluster_name",
    "managed_task_id",
]


class EndReason(StrEnum):
    """Why a task (and so its job) ended, for programs; ``JobEnd.message`` says it for people."""

    SUCCEEDED = "succeeded"
    EXIT_CODE = "exit_code"
    """The run exited non-zero on nodes that were still up, with no restart left."""
    SETUP = "setup"
    PRECHECKS = "prechecks"
    NO_RESOURCE = "no_resource"
    CANCELLED = "cancelled"
    EARLIER_TASK = "earlier_task"
    """A task before it in the pipeline (or beside it in a parallel group) failed."""
    PRIMARY_TASKS_ENDED = "primary_tasks_ended"
    """An auxiliary task of a job group, stopped once the group's primary tasks had ended."""


class JobEnd(BaseModel):
    """How a task or job ended: a status, a typed reason, and a sentence a user can act on."""

    status: ManagedJobStatus
    reason: EndReason
    message: str
    exit_code: int | None = None


class ManagedJobRequest(BaseModel):
    """``ManagedJobWorkflow``'s input."""

    job_id: int = Field(ge=1)
    name: str
    tasks: list[Task] = Field(min_length=1)
    """A pipeline: run in order, each on its own cluster; a failure stops the rest."""
    parallel: bool = False
    """Run every task at once as one group (a header document with ``execution: parallel``)."""
    group: JobGroup | None = None
    """A parallel group's header fields: its primary tasks and how the others are stopped."""
    user: str = "unknown"
    minimize: Literal["cost", "time"] = "cost"
    max_searches: int | None = Field(default=None, ge=1)
    """Full searches over every candidate before the job is FAILED_NO_RESOURCE; None: no limit
    (it waits, with backoff, until capacity comes)."""
    submitted_at: float | None = None
    """When the user submitted it (the CLI's clock); None: when the workflow started."""
    history_limit: int | None = None
    """Continue as new once the history has this many events (tests force a small one)."""
    pool: str | None = None
    """Run on an idle worker of this pool (``jobs launch --pool``): no cluster of its own, no setup."""
    resume: ManagedJobResume | None = None
    """Set by the workflow itself when it continues as new: where the job stands."""

    @model_validator(mode="after")
    def _group_names_its_tasks(self) -> ManagedJobRequest:
        """A client other than the CLI gets the header's rules too: a primary task is one of the tasks."""
        if self.group is None:
            return self
        if not self.parallel:
            raise ValueError("group: only a parallel job (parallel: true) is a job group")
        names = [task.name for task in self.tasks]
        missing = [name for name in self.group.primary_tasks if name not in names]
        if missing:
            raise ValueError(f"group.primary_tasks: no task is named {missing[0]!r}")
        places = {(alt.cloud, alt.region) for task in self.tasks for alt in task.resources.alternatives}
        # A provider without regions (``local``) has region None: the provider alone is one place.
        if self.group.placement == Placement.SAME_INFRA and (
            len(places) != 1 or next(iter(places))[0] is None
        ):
            raise ValueError(
                "group.placement SAME_INFRA: every task must be pinned to one provider and region "
                "(skyhop jobs launch pins them where the plan puts the group)"
            )
        return self


class TaskAttempt(BaseModel):
    """One cluster (or one run on it) of a task, and how it ended."""

    number: int
    """1, 2, ...: ``jobs logs`` prints a marker line before each after the first."""
    cluster_name: str
    location: str | None = None
    """Where its nodes were, ``provider/region/zone``."""
    provider: str | None = None
    region: str | None = None
    """The provider and region of ``location``, which a relaunch after a preemption avoids or prefers."""
    started_at: float
    ended_at: float | None = None
    outcome: str | None = None
    """``succeeded``, ``preempted``, ``failed (exit 3)``, ``cancelled``..."""
    log_stream: str | None = None
    """Where its output is in the store, when not the attempt's own stream: a pool job's run is a
    job of its worker's cluster (``storage.logs.job_stream``)."""


class ManagedTaskState(BaseModel):
    """One task of a managed job."""

    index: int
    name: str | None = None
    primary: bool = True
    """Whether its end decides the job's (false: an auxiliary task of a job group, stopped once
    the primary tasks ended)."""
    status: ManagedJobStatus = ManagedJobStatus.PENDING
    cluster_name: str
    task_id: str
    """``SKYHOP_TASK_ID``/``SKYPILOT_TASK_ID`` of its runs, the same across recoveries."""
    recoveries: int = 0
    restarts: int = 0
    """Restarts after user failures (``max_restarts_on_errors``)."""
    attempts: list[TaskAttempt] = []
    waiting: str | None = None
    """Why it is not running now, when it waits (no capacity: what failed, and until when)."""
    retry_at: float | None = None
    running_since: float | None = None
    job_seconds: float = 0.0
    """Time spent RUNNING by earlier attempts (``running_since`` adds the current one's)."""
    end: JobEnd | None = None


class ManagedJobState(BaseModel):
    """The ``state`` query's answer, and the workflow's result."""

    job_id: int
    name: str
    user: str
    status: ManagedJobStatus
    submitted_at: float
    ended_at: float | None = None
    resources: str
    """The tasks' resources, as ``Resources.describe`` says them."""
    tasks: list[ManagedTaskState]
    end: JobEnd | None = None
    published: int = 0
    """Status changes published so far (across continues-as-new): the sequence number of the job's
    ``JobIndexRow``, so a late report never overwrites a newer one."""

    def summary(self) -> ManagedJobSummary:
        """The memo's summary of this state (what ``jobs queue`` lists)."""
        running = [task.running_since for task in self.tasks if task.running_since is not None]
        grouped = not all(task.primary for task in self.tasks)
        return ManagedJobSummary(
            job_id=self.job_id,
            name=self.name,
            resources=self.resources,
            status=self.status,
            submitted_at=self.submitted_at,
            ended_at=self.ended_at,
            recoveries=sum(task.recoveries for task in self.tasks),
            job_seconds=sum(task.job_seconds for task in self.tasks),
            running_since=min(running) if running else None,
            message=self.end.message if self.end is not None else None,
            primary_tasks=[task.name for task in self.tasks if task.primary and task.name] if grouped else [],
        )


class RunningAttempt(BaseModel):
    """A task's run that its watch hub follows, which a job's next run waits on."""

    handle: ClusterHandle
    """The cluster it runs on, which the next run removes once the run ends."""
    key: str
    """``contract.watch_hub.run_key``: the key of the end the hub will signal."""


class ManagedJobResume(BaseModel):
    """What a managed job carries into its next run (continue-as-new): between its clusters, or
    once a pipeline task's run is followed (``running``), so an idle job's history stays short."""

    state: ManagedJobState
    provision: ProvisionState | None = None
    """The search of the current task that was waiting for capacity, when it continued then."""
    running: RunningAttempt | None = None
    """The current task's run, when it continued while that run runs: the next run only waits for its end."""
    baseline: str | None = None
    """The baseline patch the run that continued had (``workflows.changes``): the next run has it
    too, without recording its own marker (each is a history event and a visibility write)."""


def job_resources(tasks: list[Task]) -> str:
    """A job's RESOURCES in ``jobs queue`` (``ManagedJobSummary.resources``): ``2x[4+ CPU, A100:1]``
    per task, as ``Resources.describe`` says them, joined by ``; ``."""
    return "; ".join(f"{task.num_nodes}x[{task.resources.describe()}]" for task in tasks)


MANAGED_CLUSTER_PATTERN = r"^job-[0-9]+(-[0-9]+)?$"
"""The cluster names ``managed_cluster_name`` gives: reserved, ``skyhop launch -c`` refuses them."""


def managed_cluster_name(job_id: int, task_index: int, num_tasks: int) -> str:
    """The cluster a task of a managed job runs on (``job-7``, or ``job-7-2`` in a pipeline)."""
    return f"job-{job_id}" if num_tasks == 1 else f"job-{job_id}-{task_index}"


def managed_task_id(submitted_at: float, name: str, job_id: int, task_index: int) -> str:
    """``SKYHOP_TASK_ID`` of a managed task, stable across its recoveries (SkyPilot's layout)."""
    return f"sky-managed-{int(submitted_at)}_{name}_{job_id}-{task_index}"


def jobgroup_env_name(task_name: str | None, task_index: int) -> str:
    """``<NAME>`` of a parallel group task's ``SKYHOP_JOBGROUP_<NAME>_IPS`` (see the module docstring)."""
    if not task_name:
        return f"TASK{task_index}"
    return "".join(c if c.isalnum() else "_" for c in task_name.upper())
