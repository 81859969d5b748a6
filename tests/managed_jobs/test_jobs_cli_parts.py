"""The plain parts of ``skyhop jobs``: loading a job, the listing's query and rows, log order."""

from __future__ import annotations

import io
import itertools
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from skyhop.cli.app import app
from skyhop.cli.jobs_follow import AttemptLogs, StatusPrinter
from skyhop.cli.jobs_listing import id_ranges, listing_query, queue_row, shown_status
from skyhop.cli.jobs_submit import load_job
from skyhop.contract.job_index import ManagedJobStatus, ManagedJobSummary
from skyhop.contract.managed_jobs import job_resources
from skyhop.spec import TaskOverrides
from tests.conftest import run
from tests.managed_jobs.support import attempt, job_state, write_attempt

_ids = itertools.count(900_000)


def _job_id() -> int:
    """A job id no other test in the session writes log files for."""
    return next(_ids)


def _write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "job.yaml"
    path.write_text(text)
    return str(path)


def test_a_pipeline_gets_the_overrides_on_every_task_and_the_header_name(tmp_path: Path) -> None:
    entry = _write(tmp_path, "name: pipe\n---\nname: a\nrun: a\n---\nname: b\nrun: b\nnum_nodes: 2\n")
    request, dag = load_job(entry, TaskOverrides(cpus="2+", use_spot=True, envs=["K=V"]))
    assert request.name == "pipe" and not request.parallel and len(dag.tasks) == 2
    assert [t.name for t in request.tasks] == ["a", "b"]
    assert all(
        t.resources.cpus == "2+" and t.resources.use_spot and t.envs == {"K": "V"} for t in request.tasks
    )
    assert job_resources(request.tasks) == "1x[2+ CPU]; 2x[2+ CPU]"


def test_a_parallel_group_and_the_name_flag(tmp_path: Path) -> None:
    entry = _write(tmp_path, "name: grp\nexecution: parallel\n---\nname: a\nrun: a\n---\nname: b\nrun: b\n")
    request, _ = load_job(entry, TaskOverrides(name="mine"))
    assert request.parallel and request.name == "mine"
    assert [t.name for t in request.tasks] == ["a", "b"]  # -n names the job, not each task of a group
    one, _ = load_job("echo hi", TaskOverrides(name="solo"))
    assert one.name == "solo" and one.tasks[0].name == "solo" and one.tasks[0].run == "echo hi"
    assert load_job("echo hi", TaskOverrides())[0].name == "unnamed"


def test_listing_query_scopes_by_kind_user_name_and_status() -> None:
    query = listing_query("al'ice", active_only=True)
    assert query.startswith("SkyhopKind = 'managed-job' AND SkyhopUser = 'al\\'ice' AND SkyhopStatus IN (")
    assert (
        "'RUNNING'" in query and "'SUCCEEDED'" not in query and "ExecutionStatus != 'ContinuedAsNew'" in query
    )
    assert listing_query(None, name="n", ended_only=True) == (
        "SkyhopKind = 'managed-job' AND SkyhopName = 'n' AND ExecutionStatus != 'Running' "
        "AND ExecutionStatus != 'ContinuedAsNew'"
    )


def test_queue_row_durations_and_the_status_of_a_workflow_that_ended_unannounced() -> None:
    now = time.time()
    summary = ManagedJobSummary(
        job_id=7,
        name="train",
        resources="1x[A100:1]",
        status=ManagedJobStatus.RUNNING,
        submitted_at=now - 3700,
        recoveries=2,
        job_seconds=60,
        running_since=now - 30,
    )
    row = queue_row(summary, ManagedJobStatus.RUNNING, now)
    assert row == ["7", "train", "1x[A100:1]", "1h 1m ago", "1h 1m", "1m 30s", "2", "RUNNING"]
    pending = summary.model_copy(
        update={"status": ManagedJobStatus.PENDING, "job_seconds": 0, "running_since": None}
    )
    assert queue_row(pending, ManagedJobStatus.PENDING, now)[5] == "-"
    assert shown_status(summary, workflow_running=True, workflow_cancelled=False) == ManagedJobStatus.RUNNING
    assert shown_status(summary, workflow_running=False, workflow_cancelled=False) == ManagedJobStatus.FAILED
    assert (
        shown_status(summary, workflow_running=False, workflow_cancelled=True) == ManagedJobStatus.CANCELLED
    )
    done = summary.model_copy(update={"status": ManagedJobStatus.SUCCEEDED})
    assert shown_status(done, workflow_running=False, workflow_cancelled=True) == ManagedJobStatus.SUCCEEDED


def test_id_ranges() -> None:
    assert id_ranges([3, 1, 2, 7, 9, 10]) == "1-3, 7, 9-10"
    assert id_ranges([5]) == "5" and id_ranges([]) == ""
    assert id_ranges(list(range(1, 2001))) == "1-2000"


def test_logs_list_every_attempt_in_order_with_a_marker_before_each_recovery() -> None:
    job = _job_id()
    write_attempt(job, 0, 1, "one\n")
    write_attempt(job, 0, 2, "two\n")
    write_attempt(job, 0, 3, "three\n")
    state = job_state(
        job,
        [
            [
                attempt(1, outcome="preempted"),
                attempt(2, location="sim/r2/r2a", outcome="preempted"),
                attempt(3),
            ]
        ],
        ManagedJobStatus.SUCCEEDED,
    )
    out = io.BytesIO()
    run(AttemptLogs(job, out).pump(state))
    assert out.getvalue().decode().splitlines() == [
        "one",
        "--- recovery 1: attempt 2 on sim/r2/r2a (previous attempt: preempted) ---",
        "two",
        "--- recovery 2: attempt 3 on sim/r1/r1a (previous attempt: preempted) ---",
        "three",
    ]


def test_following_waits_on_the_current_attempt_and_never_prints_a_line_twice() -> None:
    job = _job_id()
    out = io.BytesIO()
    logs = AttemptLogs(job, out)
    state = job_state(job, [[attempt(1)], []])
    assert not run(logs.pump(state))  # no file yet: nothing, no error
    write_attempt(job, 0, 1, "a1\n")
    run(logs.pump(state))
    write_attempt(job, 0, 1, "a2\n")
    ended = job_state(job, [[attempt(1, outcome="preempted"), attempt(2, location=None)], []])
    run(logs.pump(ended))  # attempt 2's location is not known yet: its marker waits
    assert out.getvalue().decode() == "--- task 1 of 2: t0 ---\na1\na2\n"
    write_attempt(job, 0, 2, "b1\n")
    write_attempt(job, 1, 1, "c1\n")
    finished = job_state(
        job,
        [
            [attempt(1, outcome="preempted"), attempt(2, outcome="succeeded")],
            [attempt(1, outcome="succeeded")],
        ],
        ManagedJobStatus.SUCCEEDED,
    )
    run(logs.pump(finished))
    run(logs.pump(finished))
    assert out.getvalue().decode().splitlines() == [
        "--- task 1 of 2: t0 ---",
        "a1",
        "a2",
        "--- recovery 1: attempt 2 on sim/r1/r1a (previous attempt: preempted) ---",
        "b1",
        "--- task 2 of 2: t1 ---",
        "c1",
    ]


def test_a_marker_starts_a_line_of_its_own_after_output_with_no_final_newline() -> None:
    job = _job_id()
    write_attempt(job, 0, 1, "progress 50%")
    write_attempt(job, 0, 2, "again\n")
    state = job_state(job, [[attempt(1, outcome="preempted"), attempt(2)]], ManagedJobStatus.SUCCEEDED)
    out = io.BytesIO()
    run(AttemptLogs(job, out).pump(state))
    assert out.getvalue().decode().splitlines() == [
        "progress 50%",
        "--- recovery 1: attempt 2 on sim/r1/r1a (previous attempt: preempted) ---",
        "again",
    ]


def test_in_a_parallel_group_an_earlier_task_gaining_an_attempt_does_not_move_the_cursor() -> None:
    job = _job_id()
    write_attempt(job, 0, 1, "a-first\n")
    write_attempt(job, 1, 1, "b-line-1\n")
    out = io.BytesIO()
    logs = AttemptLogs(job, out)
    run(logs.pump(job_state(job, [[attempt(1, outcome="preempted")], [attempt(1)]])))
    write_attempt(job, 0, 2, "a-second\n")
    write_attempt(job, 1, 1, "b-line-2\n")
    run(logs.pump(job_state(job, [[attempt(1, outcome="preempted"), attempt(2)], [attempt(1)]])))
    assert out.getvalue().decode().splitlines() == [
        "--- task 1 of 2: t0 ---",
        "a-first",
        "--- task 2 of 2: t1 ---",
        "b-line-1",
        "b-line-2",
    ]


def test_the_status_printer_says_each_change_once(capsys: pytest.CaptureFixture[str]) -> None:
    printer = StatusPrinter()
    state = job_state(3, [[attempt(1)]])
    printer.show(state)
    printer.show(state)
    waiting = state.model_copy(deep=True)
    waiting.status = ManagedJobStatus.RECOVERING
    waiting.tasks[0].attempts = [attempt(1, outcome="preempted"), attempt(2)]
    waiting.tasks[0].waiting = "no capacity in sim/r1"
    printer.show(waiting)
    printer.show(waiting)
    assert capsys.readouterr().err.splitlines() == [
        "Managed job 3 (x): RUNNING",
        "Managed job 3 (x): RECOVERING",
        "  recovering: preempted; attempt 2",
        "  waiting: no capacity in sim/r1",
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["jobs", "cancel"], "name the jobs to cancel: job ids, -n NAME or --all (one of them)"),
        (
            ["jobs", "cancel", "3", "--all"],
            "name the jobs to cancel: job ids, -n NAME or --all (one of them)",
        ),
        (
            ["jobs", "cancel", "-n", "x", "--all"],
            "name the jobs to cancel: job ids, -n NAME or --all (one of them)",
        ),
        (
            ["launch", "-c", "job-3", "-y", "echo hi"],
            "cluster name 'job-3' is reserved for managed jobs (job-<n>, job-<n>-<k>); pick another name",
        ),
        (
            ["launch", "-c", "job-3-1", "-y", "echo hi"],
            "cluster name 'job-3-1' is reserved for managed jobs (job-<n>, job-<n>-<k>); pick another name",
        ),
        (
            ["jobs", "launch", "-y", "--cpus", "many", "echo hi"],
            "resources.cpus: cpus must be a positive number",
        ),
        (["jobs", "launch", "-y", "--infra", "awz", "echo hi"], "resources.infra: unknown infra 'awz'"),
        (["jobs", "launch", "-y", "-n", "x" * 300, "echo hi"], "name: String should have at most"),
    ],
)
def test_bad_usage_is_one_line_and_exit_2(argv: list[str], message: str) -> None:
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1
    assert result.output.strip().startswith(f"Error: {message}")


def test_a_bad_pipeline_header_is_exit_2(tmp_path: Path) -> None:
    entry = _write(tmp_path, "execution: sometimes\n---\nrun: a\n")
    result = CliRunner().invoke(app, ["jobs", "launch", "-y", entry])
    assert result.exit_code == 2
    assert result.output.strip() == "Error: execution: must be one of serial, parallel, got 'sometimes'"


def test_a_cluster_name_merely_starting_with_job_is_fine_for_launch() -> None:
    from skyhop.cli.app import _not_managed

    assert _not_managed("job-runner") == "job-runner" and _not_managed("jobs-3") == "jobs-3"
