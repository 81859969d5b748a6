"""The sim cloud's fault plan: which calls fail, how, for how long, and when instances are preempted.

``~/.skyhop/sim/plan.yaml``::

    catalog: /path/to/catalog.csv   # skyhop's catalog layout; default: the AWS catalog
    latency_s: 0.05                 # the provider's own time per API call
    faults:
      - zone: us-east-1a            # match on any of region, zone, instance_type (absent = any)
        error: capacity             # capacity | quota | credentials | not_supported | invalid | transient
        code: InsufficientInstanceCapacity
        attempts: 3                 # the first 3 matching calls fail (default: every call)
        after_nodes: 1              # create this many nodes of the call first (a partial failure)
      - region: us-west-2
        preempt_after_s: 30         # instances here are preempted 30 s after they start
        node: 1                     # only the node of rank 1 (default: every node)
        launches: [1, 2]            # only at the 1st and 2nd matching launch (default: every one)
      - region: us-east-1
        call: describe              # the rule's error fails listing instances (status checks) instead
        error: transient
    network:                        # optional: each node gets its own address (needs root, iproute2)
      bridge: skyhop-br0            # an existing bridge with an IPv4 /24 address (``providers.sim.network``)

The first rule that matches a call and still has attempts left decides it, so the cloud's
behaviour depends only on the plan and the sequence of calls.

A preemption happens at its time whether or not anyone calls the cloud: a small timer process
per preempting instance kills the node's processes then (as a reclaimed spot VM's die) and the
instance reads as terminated and preempted. A launch, for ``launches``, is one create call (the
missing nodes of a cluster) that makes an instance the rule selects; the first preemption rule
that selects an instance at that launch decides its deadline, so ``launches: [1, 2]`` preempts a
managed job's first two clusters and lets the third finish.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from skyhop.providers.errors import (
    CapacityError,
    CredentialsError,
    InvalidRequestError,
    NotSupportedError,
    ProviderError,
    QuotaError,
    TransientError,
)

__all__ = ["ERRORS", "FaultPlan", "FaultRule", "PlanError", "SimNetwork", "load_plan"]

ErrorName = Literal["capacity", "quota", "credentials", "not_supported", "invalid", "transient"]
CallName = Literal["run_instances", "describe"]

ERRORS: dict[str, type[ProviderError]] = {
    "capacity": CapacityError,
    "quota": QuotaError,
    "credentials": CredentialsError,
    "not_supported": NotSupportedError,
    "invalid": InvalidRequestError,
    "transient": TransientError,
}
_DEFAULT_CODES = {
    "capacity": "InsufficientInstanceCapacity",
    "quota": "InstanceLimitExceeded",
    "credentials": "AuthFailure",
    "not_supported": "Unsupported",
    "invalid": "InvalidParameterValue",
    "transient": "RequestLimitExceeded",
}


class PlanError(ValueError):
    """The fault plan file cannot be read or has an invalid field."""


class FaultRule(BaseModel):
    """One rule of the plan; unset match fields match anything."""

    model_config = ConfigDict(extra="forbid")

    region: str | None = None
    zone: str | None = None
    instance_type: str | None = None
    error: ErrorName | None = None
    call: CallName = "run_instances"
    """The API call whose matching requests fail with ``error``: creating instances, or listing
    them (what status checks and provisioning's wait ask; only ``region`` matches it)."""
    code: str | None = None
    """The cloud error code reported (default: AWS's code for that kind of error)."""
    attempts: int | None = Field(default=None, ge=1)
    """How many matching calls fail; None: all of them."""
    after_nodes: int = Field(default=0, ge=0)
    preempt_after_s: float | None = Field(default=None, gt=0)
    """Instances it selects are preempted this long after they start (or start again)."""
    node: int | None = Field(default=None, ge=0)
    """Preempt only the node of this rank; None: every node."""
    launches: list[Annotated[int, Field(ge=1)]] | None = Field(default=None, min_length=1)
    """Preempt only at these matching launches (1 is the first); None: at every one."""

    @model_validator(mode="after")
    def _preemption_fields_need_a_deadline(self) -> FaultRule:
        if self.preempt_after_s is None and (self.node is not None or self.launches is not None):
            raise ValueError("node and launches choose what is preempted: set preempt_after_s too")
        return self

    def matches(self, region: str | None, zone: str | None, instance_type: str) -> bool:
        """Whether this rule applies to a call for ``instance_type`` in ``region``/``zone``."""
        wanted = ((self.region, region), (self.zone, zone), (self.instance_type, instance_type))
        return all(rule is None or rule == actual for rule, actual in wanted)

    def selects(self, rank: int) -> bool:
        """Whether this rule preempts the node of ``rank`` (in a call it matches)."""
        return self.preempt_after_s is not None and (self.node is None or self.node == rank)

    def fault(self, message: str) -> ProviderError:
        """The error this rule raises."""
        assert self.error is not None
        return ERRORS[self.error](message, self.code or _DEFAULT_CODES[self.error])


class SimNetwork(BaseModel):
    """Give each instance a network namespace on ``bridge`` and an address of its own; absent, every
    node is this machine's 127.0.0.1 (nodes then share its ports)."""

    model_config = ConfigDict(extra="forbid")

    bridge: str = Field(min_length=1, max_length=15)


class FaultPlan(BaseModel):
    """The whole plan; an absent file is the empty plan (nothing fails)."""

    model_config = ConfigDict(extra="forbid")

    catalog: str | None = None
    latency_s: float = Field(default=0.0, ge=0)
    faults: list[FaultRule] = []
    network: SimNetwork | None = None
    digest: str = ""
    """Hash of the file's text; the cloud restarts its attempt counters when the plan changes."""


_parsed: dict[Path, tuple[str, FaultPlan]] = {}
"""The last plan read from each file, by its text: every API call reads the plan, and parsing the
YAML and validating it took most of a call's time once the state was small."""


def load_plan(path: Path) -> FaultPlan:
    """Read the plan; a bad field raises PlanError naming it and what is allowed."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return FaultPlan()
    except OSError as exc:
        raise PlanError(f"fault plan {path}: {exc.strerror}") from None
    cached = _parsed.get(path)
    if cached is not None and cached[0] == text:
        return cached[1]
    try:
        raw = yaml.safe_load(text) or {}
        plan = FaultPlan.model_validate(raw)
    except yaml.YAMLError as exc:
        raise PlanError(f"fault plan {path}: not valid YAML ({exc})") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        message = first["msg"].removeprefix("Value error, ")
        raise PlanError(f"fault plan {path}: {where}: {message}") from None
    plan = plan.model_copy(update={"digest": hashlib.sha256(text.encode()).hexdigest()[:16]})
    _parsed[path] = (text, plan)
    return plan
