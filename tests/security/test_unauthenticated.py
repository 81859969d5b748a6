"""Nobody without the payload key makes the worker act (issue 9, item 1).

The attacker reaches the same Temporal frontend as the user (any local user can), knows skyhop's
workflow, activity and task queue names, and writes valid JSON: only the key is missing.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from temporalio import workflow
from temporalio.api.common.v1 import Payload
from temporalio.client import Client, WorkflowFailureError
from temporalio.common import RawValue, RetryPolicy
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Worker

from skyhop.activities.models import SetupInput
from skyhop.cli.config import TemporalConfig
from skyhop.cli.embedded import temporal_binary
from skyhop.cli.payload_key import load_payload_key
from skyhop.contract import LONG_QUEUE, WORKFLOW_QUEUE
from skyhop.contract.clusters import LaunchResult
from skyhop.contract.converter import UNAUTHENTICATED_PAYLOAD
from skyhop.providers.home import skyhop_home
from skyhop.spec import Resources, Task
from tests.conftest import run
from tests.helpers import DevServer, WorkerProcess, wait_for
from tests.integration.support import client_for, cluster_up, down, launch, record, unique_cluster

pytestmark = pytest.mark.integration


def failure_chain(error: BaseException | None) -> list[BaseException]:
    chain = []
    while error is not None:
        chain.append(error)
        error = getattr(error, "cause", None)
    return chain


def rejected_for_the_key(error: BaseException) -> bool:
    """Whether the failure bottoms out in the codec's UnauthenticatedPayload, with its actionable text."""
    innermost = failure_chain(error)[-1]
    return getattr(innermost, "type", None) == UNAUTHENTICATED_PAYLOAD and "README" in str(innermost)


def attack_request(cluster: str, marker: Path) -> dict[str, Any]:
    """The issue's attack: a launch whose job leaves a file behind if it ever runs."""
    return {"cluster_name": cluster, "task": {"run": f"touch {marker}", "resources": {"infra": "local"}}}


async def launch_failure(client: Client, workflow_id: str) -> WorkflowFailureError:
    with pytest.raises(WorkflowFailureError) as caught:
        await client.get_workflow_handle(workflow_id).result()
    return caught.value


def test_a_launch_started_by_the_temporal_cli_without_the_key_fails_and_runs_nothing(
    temporal_server: DevServer, live_worker: WorkerProcess, tmp_path: Path
) -> None:
    cluster, marker = unique_cluster("evil"), tmp_path / "ran"
    workflow_id = f"launch:{cluster}:cli"
    started = subprocess.run(
        [
            temporal_binary(), "workflow", "start", "--address", temporal_server.address,
            "--type", "LaunchWorkflow", "--task-queue", WORKFLOW_QUEUE, "--workflow-id", workflow_id,
            "--input", json.dumps(attack_request(cluster, marker)),
        ],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert started.returncode == 0, started.stderr

    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        assert rejected_for_the_key(await launch_failure(client, workflow_id))

    run(scenario())
    assert not marker.exists()
    assert not (skyhop_home() / "clusters" / cluster).exists()


def test_a_python_client_with_the_plain_pydantic_converter_is_refused(
    temporal_server: DevServer, live_worker: WorkerProcess, tmp_path: Path
) -> None:
    cluster, marker = unique_cluster("evil"), tmp_path / "ran"

    async def scenario() -> None:
        attacker = await Client.connect(temporal_server.address, data_converter=pydantic_data_converter)
        with pytest.raises(WorkflowFailureError) as caught:
            await attacker.execute_workflow(
                "LaunchWorkflow",
                attack_request(cluster, marker),
                id=f"launch:{cluster}:py",
                task_queue=WORKFLOW_QUEUE,
                execution_timeout=timedelta(seconds=60),
            )
        assert rejected_for_the_key(caught.value)

    run(scenario())
    assert not marker.exists()


@workflow.defn(name="AttackerWorkflow", sandboxed=False)
class AttackerWorkflow:
    """The attacker's own workflow, on the attacker's own worker and task queue."""

    @workflow.run
    async def run(self, request: dict[str, Any]) -> None:
        await workflow.execute_activity(
            "run_setup",
            request,
            task_queue=LONG_QUEUE,
            start_to_close_timeout=timedelta(seconds=60),
            retry_policy=RetryPolicy(maximum_attempts=1),
        )


async def attack_through_an_activity(client: Client, request: SetupInput) -> BaseException | None:
    """Run AttackerWorkflow on ``client`` (whose converter decides whether it is signed); its failure."""
    queue = f"attacker-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=queue, workflows=[AttackerWorkflow]):
        try:
            await client.execute_workflow(
                AttackerWorkflow.run,
                request.model_dump(mode="json"),
                id=f"attack-{uuid.uuid4().hex[:8]}",
                task_queue=queue,
                execution_timeout=timedelta(seconds=90),
            )
        except WorkflowFailureError as exc:
            return exc
    return None


def test_an_attackers_workflow_cannot_run_a_skyhop_activity(
    temporal_server: DevServer, live_worker: WorkerProcess, tmp_path: Path
) -> None:
    cluster = unique_cluster("victim")
    forged, genuine = tmp_path / "forged", tmp_path / "genuine"

    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        result: LaunchResult = await launch(client, cluster, Task(resources=Resources(infra="local")))

        def setup(marker: Path) -> SetupInput:
            return SetupInput(handle=result.handle, task=Task(setup=f"touch {marker}"), key=marker.name)

        attacker = await Client.connect(temporal_server.address, data_converter=pydantic_data_converter)
        failure = await attack_through_an_activity(attacker, setup(forged))
        assert failure is not None and rejected_for_the_key(failure)
        # The same request, signed, does run: the refusal above is the key's doing, not a bad request.
        assert await attack_through_an_activity(client, setup(genuine)) is None
        await down(client, cluster)

    run(scenario())
    assert genuine.exists()
    assert not forged.exists()


def readme_aad(kid: bytes, encoding: bytes) -> bytes:
    return (
        b"skyhop-payload\x01"
        + len(kid).to_bytes(4, "big")
        + kid
        + len(encoding).to_bytes(4, "big")
        + encoding
    )


def test_a_client_following_the_readme_format_starts_a_launch(
    temporal_server: DevServer, live_worker: WorkerProcess, tmp_path: Path
) -> None:
    """Raw payloads and ``cryptography``'s AES-GCM, not skyhop's codec: the README's description is enough."""
    cluster, marker = unique_cluster("doc"), tmp_path / "ran"
    key = load_payload_key(TemporalConfig())
    kid, encoding = hashlib.sha256(key).hexdigest()[:16].encode(), b"json/plain"
    nonce = os.urandom(12)
    sealed = AESGCM(key).encrypt(
        nonce, json.dumps(attack_request(cluster, marker)).encode(), readme_aad(kid, encoding)
    )
    payload = Payload(
        metadata={"encoding": b"binary/skyhop-encrypted", "skyhop-encoding": encoding, "skyhop-key-id": kid},
        data=b"\x01" + nonce + sealed,
    )

    async def scenario() -> None:
        plain = await Client.connect(temporal_server.address, data_converter=pydantic_data_converter)
        handle = await plain.start_workflow(
            "LaunchWorkflow",
            RawValue(payload),
            id=f"launch:{cluster}:doc",
            task_queue=WORKFLOW_QUEUE,
            result_type=RawValue,
        )
        out = (await handle.result()).payload
        assert out.metadata["skyhop-key-id"] == kid and out.data[:1] == b"\x01"
        inner = out.metadata["skyhop-encoding"]
        result = json.loads(AESGCM(key).decrypt(out.data[1:13], out.data[13:], readme_aad(kid, inner)))
        assert result["job_id"] == 1
        client = await client_for(temporal_server.address)
        await asyncio.to_thread(wait_for, marker.exists, 60, "the encrypted launch's job")
        assert (await record(client, cluster)).jobs[0].job_id == 1
        await down(client, cluster)

    run(scenario())


def test_a_cli_with_another_key_says_so_in_one_line(
    temporal_server: DevServer, live_worker: WorkerProcess, cli_env: dict[str, str]
) -> None:
    """Replies the worker signs do not verify under another key: one line and exit 1, no traceback."""
    import base64
    import os

    from tests.conftest import skyhop

    task = Task(run="true", resources=Resources(infra="local"))
    with cluster_up(temporal_server.address, unique_cluster("k"), task) as cluster:
        env = {k: v for k, v in cli_env.items() if k != "SKYHOP_KEY_FILE"}
        env["SKYHOP_KEY"] = base64.b64encode(os.urandom(32)).decode()
        listed = skyhop("queue", cluster, env=env)
    assert listed.returncode == 1, listed
    assert "Traceback" not in listed.stderr and len(listed.stderr.strip().splitlines()) == 1, listed.stderr
    assert "key" in listed.stderr.lower()
