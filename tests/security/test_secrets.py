"""A secret reaches the job's environment and nothing else: not history, not a log, not a display (issue 14).

The launch goes through the CLI on the session's real dev server and worker; then every place a
value could be left in clear is searched byte for byte: the server's SQLite files (history,
visibility, memos), ``temporal workflow show`` of every workflow of the cluster, the worker's log,
and what skyhop prints (``launch``, ``status --json``, ``queue --json``; ``--dryrun`` is
``tests/spec/test_task_schema.py``'s).
"""

from __future__ import annotations

import base64
import json
import subprocess
import uuid
from pathlib import Path

import pytest

from skyhop.cli.embedded import temporal_binary
from tests.conftest import run, skyhop
from tests.helpers import DevServer, WorkerProcess
from tests.integration.support import client_for, down, unique_cluster

pytestmark = pytest.mark.integration


def workflows_of(server: DevServer, cluster: str) -> list[str]:
    listed = subprocess.run(
        [temporal_binary(), "workflow", "list", "--address", server.address, "--query",
         f"SkyhopCluster = '{cluster}'", "-o", "json"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return [row["execution"]["workflowId"] for row in json.loads(listed.stdout or "[]")]


def shown(server: DevServer, workflow_id: str) -> str:
    """``temporal workflow show -o json``, with every payload's base64 ``data`` decoded after it."""
    text = subprocess.run(
        [temporal_binary(), "workflow", "show", "--address", server.address, "-w", workflow_id, "-o", "json"],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip

    def payload_data(node: object) -> list[str]:
        if isinstance(node, dict):
            found = (
                [base64.b64decode(node["data"]).decode(errors="replace")]
                if isinstance(node.get("data"), str)
                else []
            )
            return found + [d for value in node.values() for d in payload_data(value)]
        return [d for value in node for d in payload_data(value)] if isinstance(node, list) else []

    return "\n".join([text, *payload_data(json.loads(text))])


async def taken_down(server: DevServer, cluster: str) -> None:
    await down(await client_for(server.address), cluster)


def contents(path: Path) -> bytes:
    """A database file's bytes; a journal SQLite just removed has none."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""


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
    launched = skyhop("launch", "-y", "-c", cluster, str(task), "--secret", f"HF_TOKEN={token}", env=cli_env)
    try:
        assert launched.returncode == 0, launched
        assert seen.read_text() == f"{token} {from_yaml}"  # the job saw both values
        printed += [
            launched,
            skyhop("status", "--json", env=cli_env),
            skyhop("queue", cluster, "--json", env=cli_env),
        ]
        ids = workflows_of(temporal_server, cluster)
        assert f"cluster:{cluster}" in ids and any(i.startswith(f"launch:{cluster}:") for i in ids), ids
        histories = [shown(temporal_server, workflow_id) for workflow_id in ids]
    finally:
        run(taken_down(temporal_server, cluster))

    places = {
        **{f"{p.args[1:3]}": p.stdout + p.stderr for p in printed},
        **{f"temporal workflow show {i}": text for i, text in zip(ids, histories, strict=True)},
        "worker log": (live_worker.folder / "worker.log").read_text(errors="replace"),
    }
    database = sorted(temporal_server.db_file.parent.glob(temporal_server.db_file.name + "*"))
    assert database, "the dev server's SQLite files"
    for value in (token, from_yaml):
        assert [where for where, text in places.items() if value in text] == []
        assert [str(f) for f in database if value.encode() in contents(f)] == []
