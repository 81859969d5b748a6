"""The managed-job tests' clouds: the sim, enabled with the test catalog (``tests.failover``'s
fixture), and moto's EC2 server (``tests.providers``' fixture)."""

from __future__ import annotations

from tests.failover.conftest import sim_catalog
from tests.providers.conftest import moto

__all__ = ["moto", "sim_catalog"]
