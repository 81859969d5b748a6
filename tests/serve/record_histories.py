"""``ServiceWorkflow`` histories to replay: ``python -m tests.serve.record_histories NAME...``.

Run it only when adding a scenario. A code change that makes an existing history fail to replay
would break services that are running right now: guard the change with ``workflow.patched``
instead of re-recording. ``update_at_max_replicas`` was recorded on the code before the update
and spot changes (it launched a third replica for a service of ``replicas: 2`` during an update);
``update_rolled_back`` on the code that rolls a failed update back; ``scale_from_zero`` on the
code that noticed a held request only at its next autoscaler tick. ``update_under_baseline`` is
``update_at_max_replicas`` recorded on the code that asks one baseline for every change
(``workflows.changes``) and leaves its replicas' timers to fire (``workflows.timers``).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path

from temporalio.client import Client, WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from skyhop.contract import WORKFLOW_QUEUE, WorkflowType
from skyhop.contract.serve import (
    ServiceOperation,
    ServiceRequest,
    ServiceState,
    ServiceVersionAccepted,
    ServiceVersionRequest,
    service_workflow_id,
)
from tests.serve.test_service_workflow import FakeFleet, _ready, _state, _task, _until, service_env

HISTORIES = Path(__file__).parent / "histories"

Scenario = Callable[[FakeFleet, WorkflowEnvironment, WorkflowHandle[object, ServiceState]], Awaitable[None]]


async def _skip_until(
    env: WorkflowEnvironment,
    handle: WorkflowHandle[object, ServiceState],
    test: Callable[[ServiceState], bool],
) -> None:
    for _ in range(600):
        if test(await _state(handle)):
            return
        await env.sleep(timedelta(seconds=10))
    raise AssertionError(f"never came: {await _state(handle)}")


async def _update(handle: WorkflowHandle[object, ServiceState], run: str) -> None:
    request = ServiceVersionRequest(task=_task(run, min_replicas=2, max_replicas=2))
    await handle.execute_update(ServiceOperation.UPDATE_VERSION, request, result_type=ServiceVersionAccepted)


async def update_at_max_replicas(
    fleet: FakeFleet, env: WorkflowEnvironment, handle: WorkflowHandle[object, ServiceState]
) -> None:
    await _until(handle, lambda s: _ready(s) == [1, 2], "v1 READY")
    await _update(handle, "serve v2")
    await _skip_until(env, handle, lambda s: {r.version for r in s.replicas} == {2} and len(_ready(s)) == 2)


async def update_rolled_back(
    fleet: FakeFleet, env: WorkflowEnvironment, handle: WorkflowHandle[object, ServiceState]
) -> None:
    fleet.broken_runs.add("serve v2")
    await _until(handle, lambda s: _ready(s) == [1, 2], "v1 READY")
    await _update(handle, "serve v2")
    await _skip_until(env, handle, lambda s: s.update_message is not None and len(s.replicas) == 2)


async def scale_from_zero(
    fleet: FakeFleet, env: WorkflowEnvironment, handle: WorkflowHandle[object, ServiceState]
) -> None:
    await _skip_until(env, handle, lambda s: s.load_balancer is not None and s.replicas == [])
    fleet.window_requests = 1
    await _skip_until(env, handle, lambda s: _ready(s) == [1])
    fleet.window_requests = 0
    await _skip_until(env, handle, lambda s: s.target == 0 and s.replicas == [])


SCENARIOS: dict[str, Scenario] = {
    "update_at_max_replicas": update_at_max_replicas,
    "update_rolled_back": update_rolled_back,
    "scale_from_zero": scale_from_zero,
    "update_under_baseline": update_at_max_replicas,
}
ZERO_TO_ONE = {"scale_from_zero"}
"""Scenarios of a service with ``min_replicas: 0, max_replicas: 1`` (the others run 2 replicas)."""


async def record(name: str) -> None:
    fleet = FakeFleet()
    async with service_env(fleet) as (env, client):
        handle = await _start(client, name)
        await SCENARIOS[name](fleet, env, handle)
        await handle.cancel()
        await handle.result()
        history = await handle.fetch_history()
    HISTORIES.mkdir(exist_ok=True)
    (HISTORIES / f"service_{name}.json").write_text(history.to_json())


async def _start(client: Client, name: str) -> WorkflowHandle[object, ServiceState]:
    bounds = (0, 1) if name in ZERO_TO_ONE else (2, 2)
    task = _task("serve v1", min_replicas=bounds[0], max_replicas=bounds[1])
    return await client.start_workflow(
        WorkflowType.SERVICE,
        ServiceRequest(name="svc", task=task, user="recorder"),
        id=service_workflow_id("svc"),
        task_queue=WORKFLOW_QUEUE,
        result_type=ServiceState,
    )


if __name__ == "__main__":
    for scenario in sys.argv[1:]:
        asyncio.run(record(scenario))
