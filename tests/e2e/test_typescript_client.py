"""A client in another language drives skyhop from README alone (issue 14, "Other-language clients").

``tests/ts_client/launch.mjs`` uses ``@temporalio/client`` from npm and a payload codec written from
README's "Payload encryption" (``codec.mjs``), with the workflow type, id and task queue README's
"The workflow contract" gives. Without its codec the same program is refused by the worker: the
user reads why, and nothing runs.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
from google.protobuf import json_format
from temporalio.api.common.v1 import Payload
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from skyhop.contract import cluster_workflow_id
from skyhop.contract.codec import COMPRESS_FROM, EncryptingCodec, Keyring
from skyhop.providers.home import skyhop_home
from tests.conftest import REPO, run, skyhop
from tests.helpers import DevServer, WorkerProcess

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

CLIENT = REPO / "tests" / "ts_client"


def node() -> str:
    """The ``node`` binary with the client's npm packages installed; fails (never skips) without them."""
    found = shutil.which("node")
    if found is None:
        pytest.fail("node is not installed: .ci/run installs Debian's nodejs and npm")
    if not (CLIENT / "node_modules" / "@temporalio" / "client").is_dir():
        pytest.fail(f"the TypeScript client's packages are missing: run `npm ci` in {CLIENT} (.ci/run does)")
    return found


def ts_launch(
    address: str, cluster: str, command: str, env: dict[str, str], *extra: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [node(), "launch.mjs", "--address", address, "--cluster", cluster, "--run", command, *extra],
        cwd=CLIENT, env=env, capture_output=True, text=True, timeout=240,
    )  # fmt: skip


def test_a_typescript_client_with_the_readme_codec_runs_a_launch(
    temporal_server: DevServer, live_worker: WorkerProcess, cli_env: dict[str, str]
) -> None:
    cluster, value = f"ts-{uuid.uuid4().hex[:8]}", f"echoed-{uuid.uuid4().hex[:8]}"
    launched = ts_launch(temporal_server.address, cluster, f"echo {value}", cli_env)
    assert launched.returncode == 0, launched.stderr
    try:
        out = json.loads(launched.stdout)
        # The worker's encrypted LaunchResult and ClusterRecord, decrypted by the TypeScript codec.
        assert out["launch"]["cluster_name"] == cluster
        assert out["launch"]["job_id"] == 1 and out["launch"]["provisioned"] is True
        assert out["job"]["status"] == "SUCCEEDED" and out["job"]["user"] == "ts-client"
        logs = skyhop("logs", cluster, "1", "--no-follow", env=cli_env)
        assert logs.returncode == 0 and logs.stdout == f"{value}\n", logs
    finally:
        downed = skyhop("down", "-y", cluster, env=cli_env)
        assert downed.returncode == 0, downed.stderr


def test_a_typescript_client_without_the_codec_is_refused_and_nothing_runs(
    temporal_server: DevServer, live_worker: WorkerProcess, cli_env: dict[str, str], tmp_path: Path
) -> None:
    cluster, marker = f"ts-{uuid.uuid4().hex[:8]}", tmp_path / "ran"
    refused = ts_launch(temporal_server.address, cluster, f"touch {marker}", cli_env, "--no-codec")

    assert refused.returncode == 1, refused
    assert refused.stdout == ""
    message = refused.stderr.strip()
    assert len(message.splitlines()) == 1, message
    assert message.startswith("launch failed: UnauthenticatedPayload: rejected an unauthenticated payload")
    assert "(json/plain) is not encrypted with a skyhop key" in message
    assert "README 'Payload encryption'" in message

    async def cluster_workflow_exists() -> bool:
        client = await Client.connect(temporal_server.address)
        try:
            await client.get_workflow_handle(cluster_workflow_id(cluster)).describe()
        except RPCError as exc:
            assert exc.status == RPCStatusCode.NOT_FOUND, exc
            return False
        return True

    assert not run(cluster_workflow_exists())
    assert not marker.exists()
    assert not (skyhop_home() / "clusters" / cluster).exists()


def test_a_launch_that_fails_reads_as_the_workers_error_through_the_codec(
    temporal_server: DevServer, live_worker: WorkerProcess, cli_env: dict[str, str]
) -> None:
    """A failure's message travels encrypted (README): the TypeScript codec makes it readable again."""
    cluster = f"ts-{uuid.uuid4().hex[:8]}"
    failed = ts_launch(temporal_server.address, cluster, "true", cli_env, "--accelerators", "H100:8")
    assert failed.returncode == 1, failed
    message = failed.stderr.strip()
    assert message.startswith("launch failed: NoFeasibleOffering: "), message
    assert "H100" in message and "Encoded failure" not in message


def test_the_readme_codec_reads_a_compressed_payload_and_a_plain_one(tmp_path: Path) -> None:
    """Format version 2 (a large payload, zlib-compressed) and version 1, written by skyhop's codec,
    read by ``codec.mjs``: what a TypeScript client meets in a big query answer or result."""
    key = bytes(range(32))
    codec = EncryptingCodec(Keyring((key,)))
    texts = ['"' + "row " * COMPRESS_FROM + '"', '"short"']
    written = [codec.encrypt(Payload(metadata={"encoding": b"json/plain"}, data=t.encode())) for t in texts]
    assert [payload.data[0] for payload in written] == [2, 1]
    # Protobuf's JSON form (bytes as base64), as the codec server answers.
    (tmp_path / "payloads.json").write_text(json.dumps([json_format.MessageToDict(p) for p in written]))
    script = (
        "import { SkyhopCodec, loadKeyring } from './codec.mjs';"
        "import { readFileSync } from 'node:fs';"
        f"const raw = JSON.parse(readFileSync({json.dumps(str(tmp_path / 'payloads.json'))}, 'utf8'));"
        "const b = (s) => Buffer.from(s, 'base64');"
        "const payloads = raw.map((p) => ({ metadata: Object.fromEntries(Object.entries(p.metadata)"
        ".map(([k, v]) => [k, b(v)])), data: b(p.data) }));"
        "const decoded = await new SkyhopCodec(loadKeyring()).decode(payloads);"
        "console.log(JSON.stringify(decoded.map((p) => Buffer.from(p.data).toString())));"
    )
    env = {"PATH": "/usr/bin:/bin", "SKYHOP_KEY": base64.b64encode(key).decode()}
    read = subprocess.run(
        [node(), "--input-type=module", "-e", script],
        cwd=CLIENT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert read.returncode == 0, read.stderr
    assert json.loads(read.stdout) == texts
