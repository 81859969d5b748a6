"""A task's ``pool:`` section: SkyPilot's keys validated, planned by ``--dryrun``, refused by launches.

In process (the Typer app, as the CLI runs it), like ``test_task_schema``: nothing here needs a server,
and a refused launch must start nothing, so none is given.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from skyhop.cli.app import app

POOL = {"resources": {"infra": "local", "cpus": "1+"}, "setup": "echo ready", "pool": {"workers": 3}}


def _run(tmp_path: Path, doc: dict[str, Any], *argv: str) -> tuple[int, str, Path]:
    path = tmp_path / "pool.yaml"
    path.write_text(yaml.safe_dump(doc))
    result = CliRunner().invoke(app, [*argv, str(path)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output, path


def test_dryrun_plans_one_worker_and_says_how_to_apply_the_pool(tmp_path: Path) -> None:
    code, output, path = _run(tmp_path, POOL, "launch", "--dryrun")
    assert code == 0, output
    assert "Considered resources (1 node)" in output
    assert (
        f"{path} defines a pool of 3 workers: apply it with skyhop jobs pool apply -p NAME {path}" in output
    )


def test_dryrun_json_names_the_workers_and_the_apply_command(tmp_path: Path) -> None:
    code, output, path = _run(tmp_path, POOL, "launch", "--json", "--dryrun")
    assert code == 0, output
    item = json.loads(output)["items"][0]
    assert item["pool"] == {"workers": 3, "apply": f"skyhop jobs pool apply -p NAME {path}"}
    assert item["provider"] == "local" and item["num_nodes"] == 1


@pytest.mark.parametrize(
    "argv", [("launch", "-y"), ("launch", "-y", "-d"), ("jobs", "launch", "-y"), ("exec", "dev")]
)
def test_running_a_pool_file_is_refused_with_the_pointer(tmp_path: Path, argv: tuple[str, ...]) -> None:
    code, output, path = _run(tmp_path, POOL, *argv)
    assert code == 2, output
    assert output.strip() == (
        f"Error: {path} defines a pool of 3 workers: apply it with skyhop jobs pool apply -p NAME {path}"
    )


REFUSED = [
    ({"workers": 2, "size": 1}, "pool.size: unknown field; allowed: downscale_delay_seconds, max_workers"),
    ({}, "pool: workers: required"),
    ({"workers": -1}, "pool.workers: Input should be greater than or equal to 0"),
    ({"workers": True}, "pool.workers: Input should be a valid integer"),
    ({"workers": 100000}, "pool.workers: Input should be less than or equal to 256"),
    ({"min_workers": 1, "max_workers": 4}, "pool: min_workers: pool autoscaling is not supported yet"),
    ({"workers": 2, "queue_length_threshold": 3}, "pool: queue_length_threshold: pool autoscaling"),
    ({"workers": 2, "spot_placer": "dynamic_fallback"}, "pool: spot_placer: not supported yet"),
]


@pytest.mark.parametrize(("pool", "message"), REFUSED, ids=[m.split(":")[1][:30] for _, m in REFUSED])
def test_a_bad_pool_section_is_one_line_naming_the_field(
    tmp_path: Path, pool: dict[str, Any], message: str
) -> None:
    code, output, _ = _run(tmp_path, {**POOL, "pool": pool}, "launch", "--dryrun")
    assert code == 2 and message in output, output
    assert len(output.strip().splitlines()) == 1


def test_a_pool_file_may_have_a_run_each_worker_runs_once(tmp_path: Path) -> None:
    code, output, _ = _run(tmp_path, {**POOL, "run": "echo setup done"}, "launch", "--dryrun")
    assert code == 0 and "skyhop jobs pool apply" in output, output
