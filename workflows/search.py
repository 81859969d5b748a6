"""The custom search attributes skyhop's workflows carry, for listings and the Web UI."""

from __future__ import annotations

from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes

__all__ = [
    "CLUSTER",
    "FIRST_LAUNCH_STAGE",
    "KIND",
    "STAGE",
    "STATUS",
    "USER",
    "cluster_search_attributes",
    "launch_search_attributes",
]

KIND = SearchAttributeKey.for_keyword("SkyhopKind")
"""``cluster`` or ``launch``."""
CLUSTER = SearchAttributeKey.for_keyword("SkyhopCluster")
STATUS = SearchAttributeKey.for_keyword("SkyhopStatus")
"""A cluster's status (INIT, UP, STOPPED, TERMINATED)."""
STAGE = SearchAttributeKey.for_keyword("SkyhopStage")
"""A launch's current stage."""
FIRST_LAUNCH_STAGE = "lock"
"""The stage a launch starts in: waiting for its cluster's lock."""
USER = SearchAttributeKey.for_keyword("SkyhopUser")


def cluster_search_attributes(name: str, user: str) -> TypedSearchAttributes:
    """What a cluster workflow starts with, so listings find it at once."""
    return TypedSearchAttributes(
        [
            SearchAttributePair(KIND, "cluster"),
            SearchAttributePair(CLUSTER, name),
            SearchAttributePair(STATUS, "INIT"),
            SearchAttributePair(USER, user),
        ]
    )


def launch_search_attributes(cluster_name: str, user: str) -> TypedSearchAttributes:
    """What a launch workflow starts with."""
    return TypedSearchAttributes(
        [
            SearchAttributePair(KIND, "launch"),
            SearchAttributePair(CLUSTER, cluster_name),
            SearchAttributePair(STAGE, FIRST_LAUNCH_STAGE),
            SearchAttributePair(USER, user),
        ]
    )
