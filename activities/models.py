"""Inputs and outputs of skyhop's activities (one model in, one model out)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from optimizer.blocklist import Blocklist
from providers.base import ClusterHandle
from spec import Task
from workflows.contract import ClaimRequest, JobRecord, JobSubmission

__all__ = [
    "FileMountsInput",
    "LaunchRunningInput",
    "OpenClusterInput",
    "OptimizeInput",
    "RunJobInput",
    "SetupInput",
    "SubmitJobInput",
    "SyncWorkdirInput",
    "WaitJobInput",
]


class OptimizeInput(BaseModel):
    task: Task
    blocklist: Blocklist = Blocklist()
    """Places failover has ruled out."""
    minimize: Literal["cost", "time"] = "cost"


class SyncWorkdirInput(BaseModel):
    handle: ClusterHandle
    workdir: str


class FileMountsInput(BaseModel):
    handle: ClusterHandle
    file_mounts: dict[str, str]


class SetupInput(BaseModel):
    handle: ClusterHandle
    task: Task
    key: str
    """Unique per launch, so a retried setup re-attaches instead of running twice."""


class RunJobInput(BaseModel):
    handle: ClusterHandle
    job: JobRecord
    task: Task
    sync_workdir: bool = False


class WaitJobInput(BaseModel):
    handle: ClusterHandle
    job: JobRecord


class OpenClusterInput(BaseModel):
    cluster_name: str
    user: str
    claim: ClaimRequest | None = None
    """Claim the cluster's lock with the start (signal-with-start)."""


class LaunchRunningInput(BaseModel):
    workflow_id: str
    """A launch that claimed a cluster's lock."""


class SubmitJobInput(BaseModel):
    cluster_name: str
    submission: JobSubmission
