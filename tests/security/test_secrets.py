"""A secret reaches the job's environment and nothing else: not history, not a log, not a display (issue 14).

The launch goes through the CLI on the session's real dev server and worker; then every place a
value could be left in clear is searched byte for byte: the server's SQLite files (history,
visibility, memos), ``temporal workflow show`` of every workflow of the cluster, the worker's log,
and what skyhop prints (``launch``, ``--dryrun`` text and JSON, ``status --json``, ``queue``).
"""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest

from skyhop.cli.embedded import temporal_binary
from tests.conftest import skyhop
from tests.helpers import DevServer, WorkerProcess
from tests.integration.support import unique_cluster

pytestmark = pytest.mark.integration


def workflows_of(server: DevServer, cluster: str) -> list[str]:
    listed = subprocess.run(
        [temporal_binary(), "workflow", "list", "--address", server.address, "--query",
         f"SkyhopCluster = '{cluster}'", "-o", "json"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return [row["execution"]["workflowId"] for row in json.loads(listed.stdout or "[]")]


def shown(server: DevServer, workflow_id: str) -> str:
    return subprocess.run(
        [temporal_binary(), "workflow", "show", "--address", server.address, "-w", workflow_id, "-o", "json"],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip


def test_secret_values_reach_the_job_and_nowhere_else(
    temporal_server: DevServer, live_worker: WorkerProcess, cli_env: dict[str, str], tmp_path: Path
) -> None:
    token, from_yaml = f"hf_{uuid.uuid4().hex}", f"sk_{uuid.uuid4().hex}"
    seen = tmp_path / "seen"
    task = tmp_path / "task.yaml"
    task.write_text(
        "resources: {infra: local}\n"
        f"secrets: {{API_SECRET: {from_yaml}, HF_TOKEN: null}}\n"
        f'run: printf %s "$HF_TOKEN $API_SECRET" > {seen}\n'
    )
    cluster = unique_cluster("secret")
    printed = []
    dryrun = skyhop("launch", "--dryrun", str(task), "--secret", f"HF_TOKEN={token}", env=cli_env)
    dryrun_json = skyhop(
        "launch", "--dryrun", "--json", str(task), "--secret", f"HF_TOKEN={token}", env=cli_env
    )
    assert dryrun.returncode == 0 and dryrun_json.returncode == 0, (dryrun, dryrun_json)
    launched = skyhop("launch", "-y", "-c", cluster, str(task), "--secret", f"HF_TOKEN={token}", env=cli_env)
    try:
        assert launched.returncode == 0, launched
        assert seen.read_text() == f"{token} {from_yaml}"  # the job saw both values
        printed += [dryrun, dryrun_json, launched]
        printed += [skyhop("status", "--json", env=cli_env), skyhop("queue", cluster, "--json", env=cli_env)]
        printed += [skyhop("queue", cluster, env=cli_env)]
        ids = workflows_of(temporal_server, cluster)
        assert f"cluster:{cluster}" in ids and any(i.startswith(f"launch:{cluster}:") for i in ids), ids
        histories = [shown(temporal_server, workflow_id) for workflow_id in ids]
    finally:
        skyhop("down", "-y", cluster, env=cli_env)

    places = {
        **{f"{p.args[1:3]}": p.stdout + p.stderr for p in printed},
        **{f"temporal workflow show {i}": text for i, text in zip(ids, histories, strict=True)},
        "worker log": (live_worker.folder / "worker.log").read_text(errors="replace"),
    }
    database = sorted(temporal_server.db_file.parent.glob(temporal_server.db_file.name + "*"))
    assert database, "the dev server's SQLite files"
    for value in (token, from_yaml):
        assert [where for where, text in places.items() if value in text] == []
        assert [str(f) for f in database if value.encode() in f.read_bytes()] == []
    assert '"<redacted>"' in dryrun_json.stdout
