"""The failover tests' clouds: moto's EC2 (the provider tests' fixtures) and the enabled sim."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.providers.conftest import faults, moto
from tests.providers.sim_support import enabled_sim

__all__ = ["faults", "moto", "sim_catalog"]


@pytest.fixture
def sim_catalog(tmp_path: Path) -> Iterator[Path]:
    """The sim enabled with the test catalog, whose path a fault plan names."""
    with enabled_sim(tmp_path) as catalog:
        yield catalog
