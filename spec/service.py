"""``Service``: a task's ``service:`` section, SkyPilot's SkyServe schema as a typed model.

``skyhop launch`` runs a task that has one as SkyPilot's ``sky launch`` does (the section does not
change what runs); ``skyhop serve up`` (not built yet) is what reads it. It is validated here, in
full, so a service file is refused on the day it is written, not the day serving ships, and the
serving code starts from one canonical form: ``readiness_probe`` always a ``ReadinessProbe``,
``replicas`` always a ``ReplicaPolicy``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from skyhop.spec.pool import Pool

__all__ = [
    "DEFAULT_INITIAL_DELAY_S",
    "DEFAULT_PROBE_TIMEOUT_S",
    "LoadBalancer",
    "LoadBalancingPolicy",
    "ReadinessProbe",
    "ReplicaPolicy",
    "Service",
    "SpotPlacer",
    "Tls",
]

DEFAULT_INITIAL_DELAY_S = 1200.0
"""How long a new replica may take to become ready (SkyPilot's default: model downloads are slow)."""
DEFAULT_PROBE_TIMEOUT_S = 15.0
"""How long one readiness probe may take (SkyPilot's default)."""


class LoadBalancingPolicy(StrEnum):
    """How requests are spread over the ready replicas."""

    ROUND_ROBIN = "round_robin"
    LEAST_LOAD = "least_load"
    INSTANCE_AWARE_LEAST_LOAD = "instance_aware_least_load"


class SpotPlacer(StrEnum):
    """Where spot replicas go."""

    DYNAMIC_FALLBACK = "dynamic_fallback"
    """Spread spot replicas over zones, moving away from zones that preempt them."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ReadinessProbe(_Strict):
    """The request that tells a replica is ready: a GET of ``path``, or a POST of ``post_data``."""

    path: str = "/"
    initial_delay_seconds: float = Field(default=DEFAULT_INITIAL_DELAY_S, ge=0)
    timeout_seconds: float = Field(default=DEFAULT_PROBE_TIMEOUT_S, gt=0)
    endpoint_probe_interval_seconds: float | None = Field(default=None, gt=0)
    consecutive_failure_threshold_timeout: float | None = Field(default=None, ge=0)
    post_data: str | dict[str, Any] | None = None
    headers: dict[str, str] = {}


class LoadBalancer(_Strict):
    stream_timeout_seconds: float | None = Field(default=None, gt=0)


class ReplicaPolicy(_Strict):
    """How many replicas run: a fixed count (``replicas: N``) or autoscaling on QPS."""

    min_replicas: int = Field(ge=0)
    max_replicas: int | None = Field(default=None, ge=0)
    num_overprovision: int | None = Field(default=None, ge=0)
    target_qps_per_replica: float | dict[str, float] | None = None
    """QPS one replica should serve, or per accelerator (``{H100: 10, A100: 5}``)."""
    dynamic_ondemand_fallback: bool | None = None
    base_ondemand_fallback_replicas: int | None = Field(default=None, ge=0)
    spot_placer: SpotPlacer | None = None
    upscale_delay_seconds: float | None = None
    downscale_delay_seconds: float | None = None

    @model_validator(mode="before")
    @classmethod
    def _lower_placer(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("spot_placer"), str):
            data = {**data, "spot_placer": data["spot_placer"].lower()}
        return data

    @model_validator(mode="after")
    def _check_bounds(self) -> ReplicaPolicy:
        if self.max_replicas is not None and self.max_replicas < self.min_replicas:
            raise ValueError("max_replicas must be at least min_replicas")
        if self.max_replicas not in (None, self.min_replicas) and self.target_qps_per_replica is None:
            raise ValueError("autoscaling (max_replicas above min_replicas) needs target_qps_per_replica")
        return self


class Tls(_Strict):
    keyfile: str
    certfile: str


class Service(_Strict):
    """SkyPilot's ``service:`` section, canonical: ``replicas``/``workers`` become ``replica_policy``."""

    readiness_probe: ReadinessProbe = ReadinessProbe()
    load_balancer: LoadBalancer | None = None
    replica_policy: ReplicaPolicy = ReplicaPolicy(min_replicas=1)
    pool: Pool | None = None
    """SkyPilot's service-level pool (refused by ``serve up``); a task's own ``pool:`` is the same schema."""
    ports: int | None = Field(default=None, ge=1, le=65535)
    """The replicas' serving port (default: the task's only ``resources.ports``)."""
    load_balancing_policy: LoadBalancingPolicy = LoadBalancingPolicy.LEAST_LOAD
    tls: Tls | None = None

    @model_validator(mode="before")
    @classmethod
    def _canonical(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if isinstance(data.get("readiness_probe"), str):
            data["readiness_probe"] = {"path": data["readiness_probe"]}
        if isinstance(data.get("load_balancing_policy"), str):
            data["load_balancing_policy"] = data["load_balancing_policy"].lower()
        if data.get("replicas") is not None and data.get("workers") is not None:
            raise ValueError("give either 'replicas' or 'workers', not both")
        fixed = data.pop("replicas", None)
        workers = data.pop("workers", None)
        if fixed is None and workers is not None and data.get("pool") is None:
            fixed = workers
        elif workers is not None:
            data["pool"] = {**(data.get("pool") or {}), "workers": workers}
        if fixed is not None:
            if data.get("replica_policy") is not None:
                raise ValueError("give either 'replicas' or 'replica_policy', not both")
            if isinstance(fixed, bool) or not isinstance(fixed, int) or fixed < 0:
                raise ValueError(f"replicas must be a count of at least 0, got {fixed!r}")
            data["replica_policy"] = {"min_replicas": fixed, "max_replicas": fixed}
        if data.get("pool") is not None and data.get("replica_policy") is not None and fixed is None:
            raise ValueError("a pool takes workers, not a replica_policy")
        return data
