"""Running one job on several nodes and waiting for it, the way setup and run both need."""

from __future__ import annotations

import asyncio
import json

from temporalio import activity

from providers.base import ClusterHandle
from providers.registry import get_provider
from providers.runtime.jobs import JobOutcome, JobSpec, combine_node_states
from spec import Task

__all__ = ["WORKDIR", "job_env", "run_on_nodes"]

WORKDIR = "workdir"
"""Where the task's workdir lands on a node, relative to its runtime folder (SkyPilot: ~/sky_workdir)."""

_POLL_FIRST_S = 0.05
_POLL_MAX_S = 1.0


def job_env(handle: ClusterHandle, task: Task, rank: int, task_id: str) -> dict[str, str]:
    """The task's envs plus rank variables, under both SKYHOP_* and SKYPILOT_* names."""
    nodes = handle.nodes[: task.num_nodes]
    gpus = sum(handle.offering.accelerators.values())
    info = {
        "cluster_name": handle.cluster_name,
        "cloud": handle.offering.provider,
        "region": handle.offering.region,
        "zone": handle.offering.zone,
    }
    values = {
        "NODE_RANK": str(rank),
        "NUM_NODES": str(len(nodes)),
        "NODE_IPS": "\n".join(node.ip for node in nodes),
        "TASK_ID": task_id,
        "NUM_GPUS_PER_NODE": str(int(-(-gpus // 1))),
        "CLUSTER_INFO": json.dumps(info),
    }
    env = {key: value for key, value in task.envs.items() if value is not None}
    for name, value in values.items():
        env[f"SKYHOP_{name}"] = value
        env[f"SKYPILOT_{name}"] = value
    return env


async def run_on_nodes(handle: ClusterHandle, specs: list[JobSpec]) -> JobOutcome:
    """Start ``specs[rank]`` on node ``rank`` and wait until the job is decided.

    Heartbeats while it waits. If any node fails, the others are stopped. If the activity is
    cancelled, the job is stopped on every node before the cancellation propagates.
    """
    provider = get_provider(handle.offering.provider)
    runtimes = [provider.runtime(handle.nodes[rank]) for rank in range(len(specs))]
    await asyncio.gather(*(rt.start_job(spec) for rt, spec in zip(runtimes, specs, strict=True)))
    key = specs[0].key
    poll = _POLL_FIRST_S
    try:
        while True:
            states = await asyncio.gather(
                *(rt.job_state(spec.key) for rt, spec in zip(runtimes, specs, strict=True))
            )
            outcome = combine_node_states(list(states))
            if outcome is not None:
                if outcome.status != "SUCCEEDED":
                    await asyncio.gather(*(rt.cancel_job(key) for rt in runtimes))
                return outcome
            activity.heartbeat()
            await asyncio.sleep(poll)
            poll = min(poll * 2, _POLL_MAX_S)
    except asyncio.CancelledError:
        await asyncio.shield(asyncio.gather(*(rt.cancel_job(key) for rt in runtimes)))
        raise
