"""The serving part of the contract: what a service's load balancer takes and reports.

The load balancer (``python -m skyhop.serve.load_balancer``) is a process of its own. On start it
prints one ``LoadBalancerReady`` line (JSON) on stdout, then serves two loopback ports: the service
endpoint, and a control port that answers only requests carrying the bearer token from its token
file (mode 0600) as ``Content-Type: application/json``:

- ``PUT /v1/replicas`` with a ``ReplicaSetUpdate``: the READY replicas, replacing the previous set
  (answers a ``ReplicaSetAccepted``);
- ``GET /v1/stats``: a ``LoadBalancerStats``, the request counts the autoscaler reads.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, Field

__all__ = [
    "LoadBalancerReady",
    "LoadBalancerStats",
    "LoadBalancingPolicy",
    "ReplicaEndpoint",
    "ReplicaLoad",
    "ReplicaSetAccepted",
    "ReplicaSetUpdate",
]


class LoadBalancingPolicy(StrEnum):
    """How the load balancer picks a READY replica (the spec's ``load_balancing_policy``)."""

    LEAST_LOAD = "least_load"
    """Fewest requests in flight; ties go round the replicas, so an idle service spreads too."""
    ROUND_ROBIN = "round_robin"
    """Each replica in turn."""


class ReplicaEndpoint(BaseModel):
    """A READY replica the load balancer may send requests to (plain HTTP/1.1)."""

    replica_id: int = Field(ge=0)
    host: str = Field(min_length=1, max_length=253)
    port: int = Field(ge=1, le=65535)


class ReplicaSetUpdate(BaseModel):
    """The whole READY set: a replica left out gets no new request (those in flight finish)."""

    replicas: list[ReplicaEndpoint] = Field(max_length=1024)


class ReplicaSetAccepted(BaseModel):
    """The set is in force: ``generation`` counts the pushes this load balancer took."""

    generation: int
    replicas: int


class ReplicaLoad(BaseModel):
    """One replica's requests, as the load balancer sent them."""

    replica_id: int
    in_flight: int
    """Requests sent to it and not yet answered to the end (0 when idle, whatever went wrong)."""
    total: int
    """Requests sent to it since the load balancer started (retries count once per replica)."""
    failed: int
    """Requests whose connection to it failed (refused, reset, timed out)."""
    window_requests: int
    """Requests sent to it in the last ``LoadBalancerStats.window_seconds``."""


class LoadBalancerStats(BaseModel):
    """What the autoscaler reads: requests per replica, and the demand the service saw."""

    window_seconds: int
    window_requests: int
    """Client requests in the window, those held for want of a replica (scale from zero) included."""
    held: int
    """Client requests waiting right now for a READY replica."""
    replicas: list[ReplicaLoad]
    """The replicas of the current set, in the order they were pushed."""
    generation: int


class LoadBalancerReady(BaseModel):
    """The one line a starting load balancer prints on stdout once both ports listen."""

    pid: int
    host: str
    port: int
    control_port: int
