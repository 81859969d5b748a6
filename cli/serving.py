"""What the ``serve`` commands do, against a connected Temporal client.

A service is found by its workflow (``service:<name>``) and read by its ``state`` query; a listing
asks visibility for running workflows of kind ``service``. A replica's output is read straight
from its node (``NodeLogTail``), the load balancer's from its log file on the worker's host.
"""

from __future__ import annotations

import asyncio
import sys
from typing import TYPE_CHECKING

from skyhop.cli.named_workflows import named_states, query_state, running_names
from skyhop.cli.output import info, print_json, table
from skyhop.contract import WorkflowKind

if TYPE_CHECKING:
    from temporalio.client import Client

    from skyhop.contract.serve import ServiceState, UpdateMode
    from skyhop.spec import Task

__all__ = [
    "ServiceNotFoundError",
    "run_serve_down",
    "run_serve_logs",
    "run_serve_status",
    "run_serve_up",
    "run_serve_update",
    "service_state",
    "status_notes",
]

_ENDPOINT_WAIT_S = 120.0
_POLL_S = 0.2


class ServiceNotFoundError(LookupError):
    """No running service has that name."""


async def service_state(client: Client, name: str) -> ServiceState:
    """The service's state, by query; ServiceNotFoundError when it does not run."""
    from skyhop.contract.serve import ServiceQuery, ServiceState, ServiceStatus, service_workflow_id

    state = await query_state(client, service_workflow_id(name), ServiceQuery.STATE, ServiceState)
    if state is None or state.status == ServiceStatus.DOWN:  # a closed workflow answers queries too
        raise ServiceNotFoundError(f"service {name!r} not found; see 'skyhop serve status'")
    return state


async def run_serve_up(name: str, task: Task) -> int:
    """Start the service's workflow and print its endpoint once its load balancer listens."""
    from temporalio.client import WorkflowExecutionStatus
    from temporalio.common import WorkflowIDReusePolicy
    from temporalio.exceptions import WorkflowAlreadyStartedError

    from skyhop.cli.output import fail
    from skyhop.cli.session import current_user, open_client
    from skyhop.contract import WORKFLOW_QUEUE, WorkflowType
    from skyhop.contract.search import service_search_attributes
    from skyhop.contract.serve import ServiceRequest, service_workflow_id
    from skyhop.spec.limits import check_request_size

    client = await open_client()
    user = current_user()
    request = ServiceRequest(name=name, task=task, user=user)
    check_request_size(request, "service request")
    try:
        await client.start_workflow(
            WorkflowType.SERVICE,
            request,
            id=service_workflow_id(name),
            task_queue=WORKFLOW_QUEUE,
            search_attributes=service_search_attributes(name, user),
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
        )
    except WorkflowAlreadyStartedError:
        fail(
            f"service {name!r} already runs: skyhop serve update {name} NEW.yaml, or skyhop serve down {name}"
        )
    info(f"Service {name} starting.")
    loop = asyncio.get_running_loop()
    deadline = loop.time() + _ENDPOINT_WAIT_S
    handle = client.get_workflow_handle(service_workflow_id(name))
    while loop.time() < deadline:
        state = await service_state(client, name)
        if state.endpoint is not None:
            print(f"Endpoint: {state.endpoint}")
            info(f"Replicas are being launched; see: skyhop serve status {name}")
            return 0
        if (await handle.describe()).status != WorkflowExecutionStatus.RUNNING:
            break
        await asyncio.sleep(_POLL_S)
    reason = f": {state.message}" if state.message else ""
    fail(f"service {name}'s load balancer did not start{reason}; see: skyhop serve status {name}")


def _replica_rows(state: ServiceState) -> list[list[str]]:
    rows = []
    for replica in state.replicas:
        infra = replica.handle.offering.location if replica.handle is not None else "-"
        infra += " (spot)" if replica.use_spot else ""
        where = f"{replica.host}:{replica.port}" if replica.host and replica.port else "-"
        rows.append(
            [
                state.name,
                str(replica.replica_id),
                str(replica.version),
                infra,
                where,
                replica.status.value,
                replica.message or "",
            ]
        )
    return rows


def _as_item(state: ServiceState) -> dict[str, object]:
    item = state.model_dump(mode="json", exclude={"replicas"})
    item["endpoint"] = state.endpoint
    item["replicas"] = [
        {
            **replica.model_dump(mode="json", exclude={"handle"}),
            "host": replica.host,
            "infra": replica.handle.offering.location if replica.handle is not None else None,
            "resources": replica.handle.offering.instance_type if replica.handle is not None else None,
        }
        for replica in state.replicas
    ]
    return item


async def run_serve_status(name: str | None, *, endpoint: bool, as_json: bool) -> int:
    from skyhop.cli.session import open_client

    client = await open_client()
    states = await named_states(client, name, WorkflowKind.SERVICE, service_state, ServiceNotFoundError)
    if endpoint:
        for state in states:
            print(state.endpoint or "-")
        return 0
    if as_json:
        print_json("services", [_as_item(state) for state in states])
        return 0
    if not states:
        info("No services.")
        return 0
    table(
        ["NAME", "STATUS", "VERSION", "ENDPOINT", "REPLICAS", "REPLACED"],
        [
            [
                s.name,
                s.status.value,
                str(s.version),
                s.endpoint or "-",
                f"{sum(r.status == 'READY' for r in s.replicas)}/{s.target}",
                str(s.replaced),
            ]
            for s in states
        ],
    )
    rows = [row for state in states for row in _replica_rows(state)]
    if rows:
        print()
        table(["SERVICE", "ID", "VERSION", "INFRA", "ADDRESS", "STATUS", "MESSAGE"], rows)
    for state in states:
        for line in status_notes(state):
            info(f"{state.name}: {line}")
    return 0


def status_notes(state: ServiceState) -> list[str]:
    """What the table does not say: the update in progress, a rolled-back one, the load balancer's trouble."""
    notes = [state.message, state.update_message]
    if state.update is not None:
        update = state.update
        notes.append(
            f"updating to version {update.version} ({update.mode.value}) from version {update.previous}"
        )
    return [note for note in notes if note]


async def run_serve_update(name: str, task: Task, mode: UpdateMode) -> int:
    from temporalio.client import WorkflowUpdateFailedError

    from skyhop.cli.failures import while_busy
    from skyhop.cli.output import fail
    from skyhop.cli.session import open_client
    from skyhop.contract.failures import innermost_message
    from skyhop.contract.serve import (
        ServiceOperation,
        ServiceVersionAccepted,
        ServiceVersionRequest,
        UpdateMode,
        service_workflow_id,
    )

    client = await open_client()
    await service_state(client, name)  # a clear line when there is no such service
    handle = client.get_workflow_handle(service_workflow_id(name))
    try:
        accepted = await while_busy(
            lambda: handle.execute_update(
                ServiceOperation.UPDATE_VERSION,
                ServiceVersionRequest(task=task, mode=mode),
                result_type=ServiceVersionAccepted,
            )
        )
    except WorkflowUpdateFailedError as exc:
        fail(f"service {name} refused the update: {innermost_message(exc)}")
    if mode is UpdateMode.BLUE_GREEN:
        info(
            f"Service {name}: version {accepted.version} (blue_green) is coming up; traffic switches to it "
            "once all its replicas are READY."
        )
    else:
        info(f"Service {name}: rolling to version {accepted.version}; old replicas go as new ones are READY.")
    info(
        f"If its replicas keep failing before they are READY, it rolls back; see: skyhop serve status {name}"
    )
    return 0


async def run_serve_logs(name: str, replica_id: int | None, *, load_balancer: bool, follow: bool) -> int:
    from pathlib import Path

    from skyhop.cli.logs import NodeLogTail
    from skyhop.cli.session import open_client

    client = await open_client()
    state = await service_state(client, name)
    if load_balancer:
        if state.load_balancer is None:
            raise ServiceNotFoundError(f"service {name} has no load balancer running")
        sys.stdout.write(Path(state.load_balancer.log).read_text(errors="replace"))
        return 0
    replicas = [r for r in state.replicas if replica_id is None or r.replica_id == replica_id]
    if not replicas:
        which = f"replica {replica_id}" if replica_id is not None else "a replica"
        raise ServiceNotFoundError(f"service {name} has no {which}; see: skyhop serve status {name}")
    replica = replicas[0]
    if replica.handle is None or replica.job_key is None:
        info(f"Replica {replica.replica_id} is {replica.status.value}: its run has not started yet.")
        return 0
    tail = NodeLogTail(replica.handle, replica.job_key, 1, sys.stdout.buffer)
    await tail.pump()
    while follow and await tail.outcome() is None:
        await asyncio.sleep(0.5)
        await tail.pump()
    tail.flush_partial()
    return 0


async def run_serve_down(names: list[str], *, all_services: bool) -> int:
    """Cancel each service's workflow and wait until it has removed every replica and its load balancer."""
    from skyhop.cli.session import open_client
    from skyhop.contract.serve import ServiceState, service_workflow_id

    client = await open_client()
    if all_services:
        names = await running_names(client, WorkflowKind.SERVICE)
    for name in names:
        await service_state(client, name)  # a clear line for a name that does not run
    info(f"Taking down {', '.join(names) or 'nothing'} ...")

    async def down(name: str) -> None:
        handle = client.get_workflow_handle(service_workflow_id(name), result_type=ServiceState)
        await handle.cancel()
        await handle.result()
        info(f"Service {name} is down: its replicas and load balancer are gone.")

    await asyncio.gather(*(down(name) for name in names))
    return 0
