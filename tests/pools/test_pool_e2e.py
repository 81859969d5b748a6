"""Pools end to end, as a user runs them: ``skyhop jobs pool apply|status|down`` and
``skyhop jobs launch --pool`` against the session's server and worker, on the ``local`` provider.

Every wait is on a condition with a generous deadline (a busy 2-core machine), never a fixed sleep.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

from tests.conftest import skyhop
from tests.helpers import DevServer, WorkerProcess

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

T = TypeVar("T")
_DEADLINE_S = 240.0


def _until(what: str, probe: Callable[[], T | None], deadline_s: float = _DEADLINE_S) -> T:
    deadline = time.monotonic() + deadline_s
    while True:
        found = probe()
        if found:
            return found
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.5)


def _ok(*args: str, env: dict[str, str], cwd: Path) -> str:
    result = skyhop(*args, env=env, cwd=cwd)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def _pool(name: str, env: dict[str, str], cwd: Path) -> dict[str, Any] | None:
    items = json.loads(_ok("jobs", "pool", "status", "--json", env=env, cwd=cwd))["items"]
    return next((item for item in items if item["name"] == name), None)


def _workers(
    name: str, env: dict[str, str], cwd: Path, status: str, count: int
) -> list[dict[str, Any]] | None:
    pool = _pool(name, env, cwd)
    if pool is None:
        return None
    workers = [w for w in pool["workers"] if w["status"] == status]
    return workers if len(workers) == count and len(pool["workers"]) == count else None


def _clusters(prefix: str, env: dict[str, str], cwd: Path) -> list[str]:
    items = json.loads(_ok("status", "--json", env=env, cwd=cwd))["items"]
    return [c["name"] for c in items if c["name"].startswith(prefix)]


def _write_pool(tmp_path: Path, workers: int, run: str | None = None) -> Path:
    path = tmp_path / "pool.yaml"
    setup = f'echo "$(pwd)" >> {tmp_path}/setups.log'
    task = {"resources": {"infra": "local", "cpus": "1+"}, "setup": setup, "pool": {"workers": workers}}
    path.write_text(yaml.safe_dump({**task, **({"run": run} if run else {})}))
    return path


def test_apply_resize_status_and_down(
    temporal_server: DevServer, live_worker: WorkerProcess, cli_env: dict[str, str], tmp_path: Path
) -> None:
    name = f"p{uuid.uuid4().hex[:6]}"
    runs = tmp_path / "runs.log"
    pool_file = _write_pool(tmp_path, 2, run=f'echo "$(pwd)" >> {runs}')  # SkyPilot's "setup done" run
    applied = skyhop("jobs", "pool", "apply", "-y", "-p", name, str(pool_file), env=cli_env, cwd=tmp_path)
    assert applied.returncode == 0 and f"Pool {name} applied (version 1): 2 workers." in applied.stderr
    idle = _until("2 idle workers", lambda: _workers(name, cli_env, tmp_path, "IDLE", 2))
    assert sorted(w["cluster_name"] for w in idle) == [f"{name}-worker-1", f"{name}-worker-2"]
    assert all(w["infra"] == "local" and w["job_id"] is None for w in idle)
    assert sorted(_clusters(name, cli_env, tmp_path)) == [f"{name}-worker-1", f"{name}-worker-2"]
    _until("each worker's run, once", lambda: runs.exists() and len(runs.read_text().splitlines()) == 2)

    _ok(
        "jobs", "pool", "apply", "-y", "-p", name, str(pool_file), "--workers", "1", env=cli_env, cwd=tmp_path
    )
    (kept,) = _until("1 idle worker", lambda: _workers(name, cli_env, tmp_path, "IDLE", 1))
    assert kept["cluster_name"] == f"{name}-worker-1"  # the newest idle one went
    _until("worker 2's cluster gone", lambda: _clusters(name, cli_env, tmp_path) == [f"{name}-worker-1"])
    table = _ok("jobs", "pool", "status", name, env=cli_env, cwd=tmp_path)
    assert f"{name}-worker-1" in table and "IDLE" in table

    _ok("jobs", "pool", "down", name, "-y", env=cli_env, cwd=tmp_path)
    assert _clusters(name, cli_env, tmp_path) == []
    assert _pool(name, cli_env, tmp_path) is None
    gone = skyhop("jobs", "pool", "status", name, env=cli_env, cwd=tmp_path)
    assert gone.returncode == 1 and f"pool {name!r} not found" in gone.stderr
    assert len((tmp_path / "setups.log").read_text().splitlines()) == 2  # once per worker
    assert len(runs.read_text().splitlines()) == 2


def _jobs(ids: list[int], env: dict[str, str], cwd: Path) -> dict[int, dict[str, Any]]:
    items = json.loads(_ok("jobs", "queue", "--json", env=env, cwd=cwd))["items"]
    return {item["job_id"]: item for item in items if item["job_id"] in ids}


def _waiting_reason(address: str, job_id: int) -> str | None:
    from skyhop.cli.jobs_follow import job_state
    from tests.conftest import run
    from tests.integration.support import client_for

    async def ask() -> str | None:
        state = await job_state(await client_for(address), job_id)
        return state.tasks[0].waiting

    return run(ask())


def test_three_jobs_share_two_workers_with_no_setup_of_their_own(
    temporal_server: DevServer, live_worker: WorkerProcess, cli_env: dict[str, str], tmp_path: Path
) -> None:
    name = f"p{uuid.uuid4().hex[:6]}"
    pool_file = _write_pool(tmp_path, 2)
    _ok("jobs", "pool", "apply", "-y", "-p", name, str(pool_file), env=cli_env, cwd=tmp_path)
    _until("2 idle workers", lambda: _workers(name, cli_env, tmp_path, "IDLE", 2))

    gate = tmp_path / "go"
    job_file = tmp_path / "job.yaml"
    run_script = (
        f'echo "rank $SKYPILOT_JOB_RANK of $SKYPILOT_NUM_JOBS ($SKYHOP_JOB_RANK)"\n'
        f"while [ ! -e {gate} ]; do sleep 0.2; done\n"
    )
    job_file.write_text(yaml.safe_dump({"name": "shard", "run": run_script}))
    launched = skyhop(
        "jobs", "launch", "-y", "--pool", name, "--num-jobs", "3", str(job_file), env=cli_env, cwd=tmp_path
    )
    assert launched.returncode == 0, launched.stderr
    ids = sorted(
        int(line.split()[2]) for line in launched.stderr.splitlines() if line.startswith("Managed job")
    )
    assert len(ids) == 3

    def two_running_one_pending() -> dict[int, dict[str, Any]] | None:
        jobs = _jobs(ids, cli_env, tmp_path)
        statuses = sorted(job["status"] for job in jobs.values())
        return jobs if statuses == ["PENDING", "RUNNING", "RUNNING"] else None

    jobs = _until("two jobs running, one waiting", two_running_one_pending)
    (waiting,) = [job_id for job_id, job in jobs.items() if job["status"] == "PENDING"]
    assert _waiting_reason(temporal_server.address, waiting) == f"waiting for an idle worker of pool {name}"
    busy = _until("2 busy workers", lambda: _workers(name, cli_env, tmp_path, "BUSY", 2))
    assert sorted(w["job_id"] for w in busy) == sorted(set(ids) - {waiting})
    assert _pool(name, cli_env, tmp_path)["waiting"] == [waiting]  # type: ignore[index]

    gate.touch()
    done = _until(
        "all 3 jobs succeeded",
        lambda: (
            (jobs := _jobs(ids, cli_env, tmp_path))
            and all(job["status"] == "SUCCEEDED" for job in jobs.values())
            and jobs
        ),
    )
    assert len(done) == 3
    ranks = sorted(_ok("jobs", "logs", str(job_id), env=cli_env, cwd=tmp_path).strip() for job_id in ids)
    assert ranks == [f"rank {r} of 3 ({r})" for r in range(3)]
    assert len((tmp_path / "setups.log").read_text().splitlines()) == 2  # once per worker, never per job
    idle = _until("both workers idle again", lambda: _workers(name, cli_env, tmp_path, "IDLE", 2))
    assert all(w["job_id"] is None for w in idle)

    # One job cancelled while it runs (its worker goes back), one cancelled by the pool's down.
    held = tmp_path / "held.yaml"
    held.write_text(
        yaml.safe_dump({"name": "held", "run": f"while [ ! -e {tmp_path}/never ]; do sleep 0.2; done"})
    )
    more = skyhop(
        "jobs", "launch", "-y", "--pool", name, "--num-jobs", "2", str(held), env=cli_env, cwd=tmp_path
    )
    assert more.returncode == 0, more.stderr
    first, second = sorted(
        int(line.split()[2]) for line in more.stderr.splitlines() if line.startswith("Managed")
    )
    _until("both held jobs running", lambda: _workers(name, cli_env, tmp_path, "BUSY", 2))
    _ok("jobs", "cancel", str(first), "-y", env=cli_env, cwd=tmp_path)
    _until(
        "the cancelled job's worker idle",
        lambda: (
            (p := _pool(name, cli_env, tmp_path))
            and [w["job_id"] for w in p["workers"] if w["status"] == "BUSY"] == [second]
        ),
    )
    _ok("jobs", "pool", "down", name, "-y", env=cli_env, cwd=tmp_path)
    assert _clusters(name, cli_env, tmp_path) == []
    ended = _until(
        "both held jobs cancelled",
        lambda: (
            (jobs := _jobs([first, second], cli_env, tmp_path))
            and all(job["status"] == "CANCELLED" for job in jobs.values())
            and jobs
        ),
    )
    assert len(ended) == 2


def test_a_job_for_a_pool_that_does_not_run_is_refused(cli_env: dict[str, str], tmp_path: Path) -> None:
    job_file = tmp_path / "job.yaml"
    job_file.write_text(yaml.safe_dump({"run": "true"}))
    result = skyhop("jobs", "launch", "-y", "--pool", "nosuchpool", str(job_file), env=cli_env, cwd=tmp_path)
    assert result.returncode == 1 and "pool 'nosuchpool' not found" in result.stderr, result.stderr
