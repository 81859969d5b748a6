"""Bounds hold for any client, not only the CLI: the models a worker validates, and the providers."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from skyhop.contract.clusters import LaunchRequest
from skyhop.providers.base import ProvisionRequest
from skyhop.providers.errors import NotSupportedError
from skyhop.providers.home import skyhop_home
from skyhop.providers.local import LocalProvider
from skyhop.providers.ssh.pools import PoolsError, parse_pools
from skyhop.spec import Task
from skyhop.spec.limits import MAX_FOLDER_NODES, MAX_NUM_NODES
from tests.conftest import run


def test_a_launch_request_refuses_a_name_with_a_trailing_newline_and_too_many_nodes() -> None:
    with pytest.raises(ValidationError, match="cluster_name"):
        LaunchRequest(cluster_name="abc\n", task=Task(run="echo"))
    with pytest.raises(ValidationError, match="num_nodes"):
        LaunchRequest.model_validate(
            {"cluster_name": "abc", "task": {"run": "echo", "num_nodes": MAX_NUM_NODES + 1}}
        )
    with pytest.raises(ValidationError, match="num_nodes"):
        LaunchRequest.model_validate({"cluster_name": "abc", "task": {"run": "echo", "num_nodes": True}})


def test_local_refuses_more_nodes_than_it_can_hold_before_creating_any() -> None:
    provider = LocalProvider()
    request = ProvisionRequest(
        cluster_name="too-wide", offering=provider.offerings()[0], num_nodes=MAX_FOLDER_NODES + 1
    )
    with pytest.raises(NotSupportedError, match=f"more than {MAX_FOLDER_NODES} nodes"):
        run(provider.launch(request))
    assert not (skyhop_home() / "clusters" / "too-wide").exists()


def test_ssh_pool_names_with_a_trailing_newline_are_refused() -> None:
    with pytest.raises(PoolsError):
        parse_pools({"pool\n": {"hosts": ["10.0.0.1"]}}, "pools.yaml")
