"""Record ``LaunchWorkflow`` histories for the replay test: ``python -m tests.launch.record_histories``.

The scenarios are the fast tests' own (``test_launch_workflow``). Run it only when adding one: a
change that makes a recorded history fail to replay would break launches that are running right
now (a ``--retry-until-up`` one runs for days); guard such a change with ``workflow.patched``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

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
    scenarios = {
        "launch_failover": failover,
        "launch_existing_cluster": existing_cluster,
        "launch_cancelled": cancelled,
        "launch_continue_as_new_first_run": continue_as_new,
    }
    for name, scenario in scenarios.items():
        async with time_skipping() as env:
            cloud = FakeProviders(env.client, [EAST_A, EAST_B, WEST_A])
            async with serving(env.client, cloud):
                handle = await scenario(env.client, cloud)
                first = handle.first_execution_run_id if name.endswith("_first_run") else None
                history = await env.client.get_workflow_handle(handle.id, run_id=first).fetch_history()
                (HISTORIES / f"{name}.json").write_text(history.to_json())
                print(f"recorded {name}: {len(history.events)} events")


if __name__ == "__main__":
    asyncio.run(main())
