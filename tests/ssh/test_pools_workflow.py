"""SSH pools as deployment state in Temporal (``SSHPoolsWorkflow``): a worker on "another machine"
(its own HOME and SKYHOP_HOME) logs in with the key the CLI registered; racing launches; retried
allocations; what history holds; continue-as-new."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import uuid
from pathlib import Path

import pytest
from google.protobuf.message import Message
from temporalio.api.common.v1 import Payload
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError

from skyhop.cli.config import TemporalConfig
from skyhop.cli.failures import asked_again
from skyhop.cli.payload_key import load_payload_key
from skyhop.contract import WORKFLOW_QUEUE, WorkflowType
from skyhop.contract.codec import ENCRYPTED_ENCODING
from skyhop.contract.converter import skyhop_data_converter
from skyhop.contract.ssh_pools import (
    SSH_POOLS_ID,
    AllocatedHosts,
    AllocateHosts,
    RegisterPools,
    ReleaseHosts,
    SSHPoolsInput,
    SSHPoolsQuery,
    SSHPoolsUpdate,
)
from skyhop.providers.base import ClusterHandle, ProvisionRequest
from skyhop.providers.errors import CapacityError
from skyhop.providers.ssh import SSHProvider
from skyhop.providers.ssh.admin import register_pools, remove_pools
from skyhop.providers.ssh.connection import close_connections
from skyhop.providers.ssh.deployment import fetch_inventory, update_pools
from skyhop.providers.ssh.inventory import Host, HostFacts, Inventory
from skyhop.providers.ssh.pools import HostSpec, load_pools
from tests.conftest import cli_environment, run, skyhop
from tests.helpers import DevServer, WorkerProcess
from tests.integration.support import unique_cluster
from tests.ssh.conftest import pools_yaml, ssh_up
from tests.ssh.hosts import SSHHosts

pytestmark = pytest.mark.integration


def _key_body(key: Path) -> list[str]:
    """The lines of a private key that are secret (not its BEGIN/END armour)."""
    return [line for line in key.read_text().splitlines() if line and not line.startswith("-----")]


def test_a_worker_with_its_own_home_launches_on_a_pool_registered_from_the_cli(
    ssh_hosts: SSHHosts, tmp_path: Path
) -> None:
    server = DevServer(tmp_path / "temporal")
    server.folder.mkdir()
    laptop = cli_environment(server.address)
    elsewhere = tmp_path / "worker-machine"
    worker = WorkerProcess(
        server.address,
        tmp_path,
        env={
            **os.environ,
            "HOME": str(elsewhere),
            "SKYHOP_HOME": str(elsewhere / ".skyhop"),
            # The deployment's payload key and store (job logs reach the laptop through it), nothing else.
            "SKYHOP_KEY_FILE": laptop["SKYHOP_KEY_FILE"],
            "SKYHOP_STORE_URL": (Path(laptop["SKYHOP_HOME"]) / "store" / "content").as_uri(),
        },
    )
    # The laptop's key, gone once registered: only the copy in Temporal can log the worker in.
    key = tmp_path / "laptop" / "id_pool"
    key.parent.mkdir()
    shutil.copy(ssh_hosts.key, key)
    body = _key_body(key)
    pool, cluster = f"far-{uuid.uuid4().hex[:6]}", unique_cluster("far")
    task = tmp_path / "task.yaml"
    task.write_text("run: echo hello-from-the-pool\n")
    try:
        server.start()
        worker.start()
        ssh_up(pools_yaml(tmp_path / "pools.yaml", {pool: ssh_hosts.hosts[:1]}, key), laptop)
        key.unlink()
        out = skyhop("launch", "-y", "-c", cluster, "--infra", f"ssh/{pool}", str(task), env=laptop)
        assert out.returncode == 0, out.stderr
        assert "hello-from-the-pool" in out.stdout
        rows = json.loads(skyhop("ssh", "status", "--json", env=laptop).stdout)["items"]
        assert [(r["pool"], r["cluster"], r["rank"]) for r in rows] == [(pool, cluster, 0)]
        refused = skyhop("ssh", "down", pool, env=laptop)
        assert refused.returncode == 1 and f"held by cluster '{cluster}'" in refused.stderr
        assert "Traceback" not in refused.stderr
        # The worker logged in with the key it got from Temporal, kept private on its own disk.
        (worker_key,) = (elsewhere / ".skyhop" / "ssh" / "keys").iterdir()
        assert worker_key.stat().st_mode & 0o777 == 0o600 and _key_body(worker_key) == body
        assert skyhop("down", "-y", cluster, env=laptop).returncode == 0
        down = skyhop("ssh", "down", pool, env=laptop)
        assert down.returncode == 0, down.stderr

        async def history() -> tuple[list[Payload], list[Payload]]:
            # A client without skyhop's codec sees what Temporal stores.
            plain = await Client.connect(server.address)
            events = await plain.get_workflow_handle(SSH_POOLS_ID).fetch_history()
            stored = [p for event in events.events for p in _payloads(event)]
            codec = skyhop_data_converter(
                load_payload_key(TemporalConfig(key_file=laptop["SKYHOP_KEY_FILE"]))
            )
            assert codec.payload_codec is not None
            return stored, await codec.payload_codec.decode(stored)

        stored, decoded = run(history())
        encodings = {p.metadata.get("encoding", b"").decode() for p in stored}
        assert encodings == {ENCRYPTED_ENCODING}, encodings
        assert [line for p in stored for line in body if line.encode() in p.data] == []
        # ... and the key is there, for whoever holds the payload key (the register update's input).
        assert any(body[0].encode() in p.data for p in decoded)
    finally:
        worker.stop()
        server.stop()
    database = sorted(server.db_file.parent.glob(server.db_file.name + "*"))
    assert database, "the dev server's SQLite files"
    assert [str(f) for f in database for line in body if line.encode() in f.read_bytes()] == []


def _payloads(message: Message) -> list[Payload]:
    """Every payload anywhere in a history event."""
    if isinstance(message, Payload):
        return [message]
    found: list[Payload] = []
    for _, value in message.ListFields():
        if isinstance(value, Message):
            items = [value]
        elif isinstance(value, (str, bytes, int, float, bool)):
            items = []
        else:  # a repeated field, or a map (payload maps: headers, memos, search attributes)
            items = list(value.values()) if hasattr(value, "values") else list(value)
        found += [p for item in items if isinstance(item, Message) for p in _payloads(item)]
    return found


def test_two_launches_racing_for_the_last_host_get_different_answers(
    ssh_hosts: SSHHosts, pools_in_temporal: None, tmp_path: Path
) -> None:
    pool = f"race-{uuid.uuid4().hex[:6]}"
    specs = load_pools(pools_yaml(tmp_path / "pools.yaml", {pool: ssh_hosts.hosts[:1]}, ssh_hosts.key))
    names = [unique_cluster("race"), unique_cluster("race")]

    async def scenario() -> None:
        provider = SSHProvider()
        try:
            await register_pools(specs)
            await provider.load()
            offering = next(o for o in provider.offerings() if o.region == pool)
            requests = [ProvisionRequest(cluster_name=n, offering=offering, num_nodes=1) for n in names]
            results = await asyncio.gather(*(provider.launch(r) for r in requests), return_exceptions=True)
            handles = [r for r in results if isinstance(r, ClusterHandle)]
            refusals = [r for r in results if isinstance(r, CapacityError)]
            assert (len(handles), len(refusals)) == (1, 1), results
            winner = handles[0].cluster_name
            assert refusals[0].code == "NotEnoughHosts"
            assert f"0 free host(s) of type {offering.instance_type}, 1 needed" in str(refusals[0])
            assert f"held by: {winner}" in str(refusals[0])
            # A retried allocation (same cluster and rank), even two at once, gets the same host.
            again = AllocateHosts(
                cluster=winner, pool=pool, instance_type=offering.instance_type, num_nodes=1
            )
            answers = await asyncio.gather(
                *(update_pools(SSHPoolsUpdate.ALLOCATE, again, AllocatedHosts) for _ in range(2))
            )
            host_ids = [[h.spec.host_id for h in a.hosts] for a in answers]
            assert host_ids == [[handles[0].nodes[0].instance_id]] * 2
            assert [a.fresh for a in answers] == [[], []]  # prepared already: nothing to wipe
            await provider.terminate(handles[0])
            assert (await fetch_inventory()).held_by(winner) == {}
        finally:
            for name in names:
                await update_pools(SSHPoolsUpdate.RELEASE, ReleaseHosts(cluster=name), type(None))
            await remove_pools([pool])
            await close_connections()

    run(scenario())


def _host(pool: str, n: int) -> Host:
    spec = HostSpec(pool=pool, address=f"10.0.0.{n}", user="root")
    facts = HostFacts(hostname=f"h{n}", home="/root", cpus=2, memory_gib=4, rsync=True)
    return Host(spec=spec, facts=facts)


def test_the_pools_survive_continue_as_new(
    pools_in_temporal: None, live_worker: WorkerProcess, cli_env: dict[str, str]
) -> None:
    """A workflow of the test's own (not the session's ``ssh-pools``), with a tiny history limit."""
    workflow_id = f"ssh-pools-test-{uuid.uuid4().hex[:6]}"

    async def scenario() -> None:
        client = await Client.connect(
            cli_env["SKYHOP_TEMPORAL_ADDRESS"],
            data_converter=skyhop_data_converter(load_payload_key(TemporalConfig())),
        )
        handle = await client.start_workflow(
            WorkflowType.SSH_POOLS, SSHPoolsInput(history_limit=12), id=workflow_id, task_queue=WORKFLOW_QUEUE
        )
        first_run = handle.run_id
        hosts = [_host("cn", n) for n in range(4)]
        await handle.execute_update(
            SSHPoolsUpdate.REGISTER, RegisterPools(pools={"cn": hosts}), result_type=Inventory
        )
        shape = hosts[0].facts.shape if hosts[0].facts else ""
        given = {}
        for n in range(4):
            request = AllocateHosts(cluster=f"c{n}", pool="cn", instance_type=shape, num_nodes=1)
            given[n] = await handle.execute_update(
                SSHPoolsUpdate.ALLOCATE, request, result_type=AllocatedHosts
            )

        async def carried() -> Inventory:
            handle = client.get_workflow_handle(workflow_id)
            state: Inventory = await asked_again(
                lambda: handle.query(SSHPoolsQuery.INVENTORY, result_type=Inventory)
            )
            return state

        deadline = asyncio.get_running_loop().time() + 60
        while (await client.get_workflow_handle(workflow_id).describe()).run_id == first_run:
            assert asyncio.get_running_loop().time() < deadline, "the workflow did not continue as new"
            await asyncio.sleep(0.1)
        state = await carried()
        assert {a.cluster: a.rank for a in state.allocations.values()} == {f"c{n}": 0 for n in range(4)}
        # After the new run began, a retried allocation still gets its host; the pool is full.
        request = AllocateHosts(cluster="c0", pool="cn", instance_type=shape, num_nodes=1)
        retried = await client.get_workflow_handle(workflow_id).execute_update(
            SSHPoolsUpdate.ALLOCATE, request, result_type=AllocatedHosts
        )
        assert retried.hosts == given[0].hosts
        # A refused allocation is refused before it is accepted: it adds nothing to history.
        handle_now = client.get_workflow_handle(workflow_id)
        before = (await handle_now.describe()).raw_description.workflow_execution_info.history_length
        full = AllocateHosts(cluster="c4", pool="cn", instance_type=shape, num_nodes=1)
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle_now.execute_update(SSHPoolsUpdate.ALLOCATE, full, result_type=AllocatedHosts)
        assert (
            isinstance(refused.value.cause, ApplicationError) and refused.value.cause.type == "NotEnoughHosts"
        )
        after = (await handle_now.describe()).raw_description.workflow_execution_info.history_length
        assert after == before
        await client.get_workflow_handle(workflow_id).terminate("test over")

    run(scenario())
