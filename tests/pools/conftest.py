"""The pool tests' cloud: the sim, enabled with the test catalog (``tests.failover``'s fixture)."""

from __future__ import annotations

from tests.failover.conftest import sim_catalog

__all__ = ["sim_catalog"]
