"""The optimize activity answers a request it answered before from memory, and only while nothing
the answer came from has changed: the catalogs' files, the providers ``skyhop check`` enabled, what
the providers without a catalog offer. A stale plan would be a wrong launch."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from skyhop.activities.models import OptimizeInput
from skyhop.activities.planning import optimize
from skyhop.optimizer import Blocked, Blocklist, Plan
from skyhop.providers.base import CheckResult
from skyhop.providers.registry import write_checks
from skyhop.spec import Resources, Task
from tests.optimizer.catalogs import AWS, GCP, write

REQUEST = OptimizeInput(task=Task(run="x", resources=Resources(cpus="8")))
NO_KUBERNETES = CheckResult(enabled=False, reason="no kubeconfig")
CHEAPER_ON_AWS = "m7i.2xlarge,8,32,,,,us-east-1,us-east-1a,0.10,0.05\n"


@pytest.fixture
def catalogs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An override folder with AWS's and GCP's catalogs, on a machine without Kubernetes (as
    ``skyhop check`` finds it); every check verdict cleared after."""
    write(tmp_path, "aws", AWS)
    write(tmp_path, "gcp", GCP)
    monkeypatch.setenv("SKYHOP_CATALOG_DIR", str(tmp_path))
    write_checks({"kubernetes": NO_KUBERNETES})
    yield tmp_path
    write_checks({})


def _plan(request: OptimizeInput = REQUEST) -> Plan:
    return asyncio.run(optimize(request))


def test_the_same_request_in_the_same_world_is_answered_from_memory(catalogs: Path) -> None:
    first = _plan()
    assert _plan() is first
    elsewhere = Blocklist(entries=[Blocked(provider=first.chosen.provider)])
    assert _plan(REQUEST.model_copy(update={"blocklist": elsewhere})).chosen.provider != first.chosen.provider


def test_an_edited_catalog_file_is_optimized_again(catalogs: Path) -> None:
    assert _plan().chosen.instance_type != "m7i.2xlarge"
    write(catalogs, "aws", AWS + CHEAPER_ON_AWS)
    assert _plan().chosen.instance_type == "m7i.2xlarge"


def test_a_provider_check_disabled_is_optimized_without(catalogs: Path) -> None:
    chosen = _plan().chosen.provider
    write_checks({"kubernetes": NO_KUBERNETES, chosen: CheckResult(enabled=False, reason="no credentials")})
    assert _plan().chosen.provider not in (chosen, None)


def test_nothing_is_kept_while_a_provider_cannot_tell_its_offerings_apart(catalogs: Path) -> None:
    # Kubernetes' offerings are its clusters' nodes, asked of their API at each optimization.
    write_checks({"kubernetes": CheckResult(enabled=True, reason="a context")})
    first = _plan()
    again = _plan()
    assert again is not first and again == first
