"""Driving skyhop's workflows from a test the way a programmatic Temporal client would."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hmac
import json
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from google.protobuf.message import Message
from temporalio.api.common.v1 import Payload
from temporalio.client import Client

from skyhop.cli.client import connect
from skyhop.cli.config import TemporalConfig
from skyhop.cli.failures import asked_again
from skyhop.cli.payload_key import load_payload_key
from skyhop.contract import LAUNCH_WORKFLOW, WORKFLOW_QUEUE, ClusterStatus, cluster_workflow_id
from skyhop.contract.clusters import ClusterRecord, LaunchRequest, LaunchResult
from skyhop.spec import Task
from tests.helpers import SKYHOP_CLI, wait_for

__all__ = [
    "client_for",
    "cluster_up",
    "current_record",
    "decrypted",
    "down",
    "launch",
    "launch_submitted",
    "launched",
    "payload_mac",
    "record",
    "unique_cluster",
    "until_job_done",
]


def decrypted(printed: dict[str, Any]) -> Any:
    """The JSON of a payload as ``temporal -o json`` prints it (base64 fields), decrypted with the key."""
    from skyhop.cli.payload_key import load_keyring
    from skyhop.contract.codec import EncryptingCodec

    payload = Payload(
        metadata={k: base64.b64decode(v) for k, v in printed["metadata"].items()},
        data=base64.b64decode(printed["data"]),
    )
    return json.loads(EncryptingCodec(load_keyring(TemporalConfig())).decrypt(payload).data)


def _payloads(message: Message) -> Iterator[Payload]:
    """Every ``Payload`` inside a protobuf message, at any depth (lists and maps included)."""
    if isinstance(message, Payload):
        yield message
        return
    for field, value in message.ListFields():
        if field.type != field.TYPE_MESSAGE:
            continue
        if field.message_type.GetOptions().map_entry:
            items = list(value.values())
        elif field.is_repeated:
            items = list(value)
        else:
            items = [value]
        for item in items:
            if isinstance(item, Message):
                yield from _payloads(item)


async def plaintext_history(client: Client, workflow_id: str, run_id: str | None = None) -> bytes:
    """A workflow's history as stored, followed by every payload in it decrypted with the user's key:
    what someone holding the key reads there, to check what history holds at all."""
    from skyhop.cli.payload_key import load_keyring
    from skyhop.contract.codec import ENCRYPTED_ENCODING, EncryptingCodec

    codec = EncryptingCodec(load_keyring(TemporalConfig()))
    history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
    stored = b"".join(event.SerializeToString() for event in history.events)
    plain = [
        codec.decrypt(payload).data
        for event in history.events
        for payload in _payloads(event)
        if payload.metadata.get("encoding") == ENCRYPTED_ENCODING.encode()
    ]
    return stored + b"".join(plain)


def payload_mac(data: str) -> str:
    """``skyhop-mac`` of a JSON input, as the README tells any client to sign it (the user's key)."""
    key = load_payload_key(TemporalConfig())
    return hmac.new(
        key, b"skyhop-payload-v1" + b"\0\0\0\x0a" + b"json/plain" + data.encode(), "sha256"
    ).hexdigest()


async def client_for(address: str) -> Client:
    """A client for a test's server, which may have just been started or restarted."""
    return await connect(TemporalConfig(), address, server_starting=True)


def unique_cluster(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def launch(client: Client, cluster: str, task: Task, workflow_id: str | None = None) -> LaunchResult:
    result: LaunchResult = await client.execute_workflow(
        LAUNCH_WORKFLOW,
        LaunchRequest(cluster_name=cluster, task=task, user="tester"),
        id=workflow_id or f"launch:{cluster}:{uuid.uuid4().hex[:8]}",
        task_queue=WORKFLOW_QUEUE,
        result_type=LaunchResult,
    )
    return result


async def record(client: Client, cluster: str) -> ClusterRecord:
    handle = client.get_workflow_handle(cluster_workflow_id(cluster))
    result: ClusterRecord = await asked_again(lambda: handle.query("status", result_type=ClusterRecord))
    return result


async def down(client: Client, cluster: str) -> ClusterRecord:
    result: ClusterRecord = await client.get_workflow_handle(cluster_workflow_id(cluster)).execute_update(
        "down", result_type=ClusterRecord
    )
    return result


@contextlib.asynccontextmanager
async def launched(client: Client, cluster: str, task: Task) -> AsyncIterator[LaunchResult]:
    """A launch whose cluster is taken down when the block ends, however it ends."""
    result = await launch(client, cluster, task)
    try:
        yield result
    finally:
        await down(client, cluster)


def current_record(address: str, cluster: str) -> ClusterRecord:
    """The cluster's record, on a client and event loop of its own (so a thread can poll it)."""

    async def fetch() -> ClusterRecord:
        return await record(await client_for(address), cluster)

    return asyncio.run(fetch())


async def until_job_done(address: str, cluster: str, timeout: float, what: str) -> None:
    """Wait for the cluster's first job to end, polling from a thread so the test's event loop runs on."""
    await asyncio.to_thread(
        wait_for, lambda: current_record(address, cluster).jobs[0].status.done, timeout, what
    )


@contextlib.contextmanager
def cluster_up(address: str, cluster: str, task: Task) -> Iterator[str]:
    """A cluster launched with ``task`` for the block, then taken down unless the block already did."""

    async def up() -> None:
        await launch(await client_for(address), cluster, task)

    async def teardown() -> None:
        client = await client_for(address)
        if (await record(client, cluster)).status != ClusterStatus.TERMINATED:
            await down(client, cluster)

    asyncio.run(up())
    try:
        yield cluster
    finally:
        asyncio.run(teardown())


def launch_submitted(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen[str]:
    """``skyhop launch ARGS`` as a user runs it, returned once it has started the launch workflow:
    by then the CLI has packed every local path the task names, so the test may delete them."""
    cli = subprocess.Popen(
        [SKYHOP_CLI, "launch", *args],
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert cli.stderr is not None
    said = [cli.stderr.readline()]
    while said[-1] and not said[-1].startswith("Launch "):
        said.append(cli.stderr.readline())
    assert said[-1], said
    return cli
