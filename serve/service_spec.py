"""What a task's ``service:`` section means to the controller: its autoscaler policy and replica port.

The CLI checks a service file with ``check_service`` before anything starts, and the workflow reads
the same answers, so the two never disagree.
"""

from __future__ import annotations

from skyhop.serve.autoscaler import AutoscalerPolicy
from skyhop.spec import Task
from skyhop.spec.errors import SpecError
from skyhop.spec.resources import Resources
from skyhop.spec.service import Service

__all__ = [
    "DEFAULT_REPLICA_PORT",
    "asks_for_spot",
    "autoscaler_policy",
    "check_service",
    "on_demand",
    "replica_port",
    "service_of",
]

DEFAULT_REPLICA_PORT = 8080
"""A replica's port when neither ``service.ports`` nor one ``resources.ports`` names it."""


def service_of(task: Task) -> Service:
    """The task's service section; the workflow gets only tasks ``check_service`` accepted."""
    if task.service is None:
        raise SpecError("service", "a service needs a 'service:' section (readiness_probe, replicas...)")
    return task.service


def replica_port(task: Task) -> int:
    """The port the replicas listen on: ``service.ports``, else the task's only ``resources.ports``."""
    service = service_of(task)
    if service.ports is not None:
        return service.ports
    ports = task.resources.ports or []
    if len(ports) == 1 and ports[0].isdigit():
        return int(ports[0])
    return DEFAULT_REPLICA_PORT


def _alternatives(resources: Resources) -> list[Resources]:
    return [*(resources.any_of or []), *(resources.ordered or [])]


def asks_for_spot(task: Task) -> bool:
    """Whether the task's replicas run on spot (``use_spot``, or an alternative's)."""
    resources = task.resources
    return resources.use_spot or any(r.use_spot for r in _alternatives(resources))


def on_demand(task: Task) -> Task:
    """The task with spot asked nowhere: an on-demand fallback replica's."""
    plain = {"use_spot": False}
    resources = task.resources
    update: dict[str, object] = dict(plain)
    for key in ("any_of", "ordered"):
        alternatives: list[Resources] | None = getattr(resources, key)
        if alternatives is not None:
            update[key] = [r.model_copy(update=plain) for r in alternatives]
    return task.model_copy(update={"resources": resources.model_copy(update=update)})


def autoscaler_policy(service: Service) -> AutoscalerPolicy:
    """The spec's ``replica_policy`` as the autoscaler takes it (SkyServe's defaults for the delays)."""
    policy = service.replica_policy
    qps = policy.target_qps_per_replica
    delays = {
        name: value
        for name, value in (
            ("upscale_delay_seconds", policy.upscale_delay_seconds),
            ("downscale_delay_seconds", policy.downscale_delay_seconds),
        )
        if value is not None
    }
    return AutoscalerPolicy(
        min_replicas=policy.min_replicas,
        max_replicas=policy.max_replicas,
        target_qps_per_replica=qps if not isinstance(qps, dict) else min(qps.values()),
        base_ondemand_fallback_replicas=policy.base_ondemand_fallback_replicas or 0,
        dynamic_ondemand_fallback=bool(policy.dynamic_ondemand_fallback),
        **delays,
    )


def check_service(task: Task) -> Service:
    """``serve up``/``update``'s checks, as ``SpecError`` (exit 2): what the controller cannot run."""
    service = service_of(task)
    if service.pool is not None:
        raise SpecError("service.pool", "pools of workers are not supported yet; give replicas instead")
    if service.tls is not None:
        raise SpecError("service.tls", "TLS at the load balancer is not supported yet")
    if task.run is None:
        raise SpecError("run", "a service's replicas need a 'run' that serves on $SKYHOP_SERVE_PORT")
    if task.num_nodes != 1:
        raise SpecError("num_nodes", f"a replica is one node, got {task.num_nodes}")
    if isinstance(service.replica_policy.target_qps_per_replica, dict):
        raise SpecError(
            "service.replica_policy.target_qps_per_replica",
            "a QPS per accelerator is not supported yet; give one number",
        )
    return service
