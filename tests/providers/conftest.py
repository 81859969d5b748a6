"""Fixtures of the provider tests that the failover tests share: moto's EC2 server with fault injection."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.providers.aws_support import MotoFaults, moto_server, reset


@pytest.fixture(scope="module")
def moto() -> Iterator[str]:
    """moto's endpoint, with ``~/.aws`` pointing at it for the module's tests."""
    with moto_server(Path(os.environ["HOME"])) as endpoint:
        yield endpoint


@pytest.fixture
def faults(moto: str) -> Iterator[MotoFaults]:
    """An emptied moto whose RunInstances takes the test's faults."""
    reset(moto)
    faults = MotoFaults()
    with faults.install():
        yield faults
