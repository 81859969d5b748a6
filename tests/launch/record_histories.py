"""Record ``LaunchWorkflow`` histories for the replay test: ``python -m tests.launch.record_histories``.

The scenarios are the fast tests' own (``test_launch_workflow``). Run it only when adding one: a
change that makes a recorded history fail to replay would break launches that are running right
now (a ``--retry-until-up`` one runs for days); guard such a change with ``workflow.patched``.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from temporalio.client import Client

from tests.cluster.fakes import serving
from tests.cluster.test_autostop import time_skipping
from tests.launch.fakes import FakeProviders
from tests.launch.test_launch_workflow import (
    EAST_A,
    EAST_B,
    WEST_A,
    cancelled,
    continue_as_new,
    existing_cluster,
    failover,
)

HISTORIES = Path(__file__).parent / "histories"


async def main() -> None:
    HISTORIES.mkdir(exist_ok=True)
    # Launches from before the lock lease (``launch_failover`` ...) stay recorded as they were: the
    # current code must replay them too. These are the leased launches, and a resumed run.
    scenarios = {
        "launch_leased_failover": failover,
        "launch_leased_existing_cluster": existing_cluster,
        "launch_leased_cancelled": cancelled,
        "launch_leased_continue_as_new_first_run": continue_as_new,
        "launch_leased_continue_as_new_second_run": continue_as_new,
    }
    workflow_ids = HISTORIES / "workflow_ids.json"
    recorded: dict[str, str] = json.loads(workflow_ids.read_text()) if workflow_ids.exists() else {}
    for name, scenario in scenarios.items():
        async with time_skipping() as env:
            cloud = FakeProviders(env.client, [EAST_A, EAST_B, WEST_A])
            async with serving(env.client, cloud):
                handle = await scenario(env.client, cloud)
                first = handle.first_execution_run_id if name.endswith("_first_run") else None
                if name.endswith("_second_run"):
                    first = await _second_run(env.client, handle.id, handle.first_execution_run_id)
                history = await env.client.get_workflow_handle(handle.id, run_id=first).fetch_history()
                (HISTORIES / f"{name}.json").write_text(history.to_json())
                recorded[name] = handle.id
                print(f"recorded {name}: {len(history.events)} events")
    workflow_ids.write_text(json.dumps(recorded, indent=2, sort_keys=True) + "\n")


async def _second_run(client: Client, workflow_id: str, first_run_id: str | None) -> str:
    """The run the first one continued as new into."""
    history = await client.get_workflow_handle(workflow_id, run_id=first_run_id).fetch_history()
    last = history.events[-1].workflow_execution_continued_as_new_event_attributes
    return last.new_execution_run_id


if __name__ == "__main__":
    asyncio.run(main())
