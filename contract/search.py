"""The custom search attributes skyhop's workflows carry, for listings and the Web UI."""

from __future__ import annotations

from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes

from skyhop.contract import ClusterStatus, LaunchStage, SearchAttribute, WorkflowKind
from skyhop.contract.job_index import ManagedJobStatus
from skyhop.contract.serve import ServiceStatus

__all__ = [
    "CLUSTER",
    "KIND",
    "NAME",
    "STAGE",
    "STATUS",
    "USER",
    "cluster_search_attributes",
    "launch_search_attributes",
    "managed_job_search_attributes",
    "pool_search_attributes",
    "service_search_attributes",
]

KIND = SearchAttributeKey.for_keyword(SearchAttribute.KIND)
"""A ``WorkflowKind``: ``cluster``, ``launch``, ``managed-job``, ``service`` or ``pool``."""
CLUSTER = SearchAttributeKey.for_keyword(SearchAttribute.CLUSTER)
STATUS = SearchAttributeKey.for_keyword(SearchAttribute.STATUS)
"""A cluster's status (INIT, UP, STOPPED, TERMINATED); a managed job's ``ManagedJobStatus`` (never
CANCELLING)."""
STAGE = SearchAttributeKey.for_keyword(SearchAttribute.STAGE)
"""A launch's current stage."""
USER = SearchAttributeKey.for_keyword(SearchAttribute.USER)
NAME = SearchAttributeKey.for_keyword(SearchAttribute.NAME)
"""A managed job's or a service's name."""


def cluster_search_attributes(name: str, user: str) -> TypedSearchAttributes:
    """What a cluster workflow starts with, so listings find it at once."""
    return TypedSearchAttributes(
        [
            SearchAttributePair(KIND, WorkflowKind.CLUSTER.value),
            SearchAttributePair(CLUSTER, name),
            SearchAttributePair(STATUS, ClusterStatus.INIT.value),
            SearchAttributePair(USER, user),
        ]
    )


def launch_search_attributes(cluster_name: str, user: str) -> TypedSearchAttributes:
    """What a launch workflow starts with."""
    return TypedSearchAttributes(
        [
            SearchAttributePair(KIND, WorkflowKind.LAUNCH.value),
            SearchAttributePair(CLUSTER, cluster_name),
            SearchAttributePair(STAGE, LaunchStage.LOCK.value),
            SearchAttributePair(USER, user),
        ]
    )


def managed_job_search_attributes(
    name: str, user: str, status: ManagedJobStatus = ManagedJobStatus.PENDING
) -> TypedSearchAttributes:
    """What a managed job starts with: ``jobs queue`` and ``jobs cancel -n`` find it at once."""
    return TypedSearchAttributes(
        [
            SearchAttributePair(KIND, WorkflowKind.MANAGED_JOB.value),
            SearchAttributePair(STATUS, status.value),
            SearchAttributePair(USER, user),
            SearchAttributePair(NAME, name),
        ]
    )


def service_search_attributes(name: str, user: str) -> TypedSearchAttributes:
    """What a service starts with: ``serve status`` lists it at once."""
    return TypedSearchAttributes(
        [
            SearchAttributePair(KIND, WorkflowKind.SERVICE.value),
            SearchAttributePair(STATUS, ServiceStatus.STARTING.value),
            SearchAttributePair(USER, user),
            SearchAttributePair(NAME, name),
        ]
    )


def pool_search_attributes(name: str, user: str) -> TypedSearchAttributes:
    """What a pool starts with: ``jobs pool status`` lists it at once."""
    return TypedSearchAttributes(
        [
            SearchAttributePair(KIND, WorkflowKind.POOL.value),
            SearchAttributePair(STATUS, "PROVISIONING"),
            SearchAttributePair(USER, user),
            SearchAttributePair(NAME, name),
        ]
    )
