"""Asking for an SSH pool before any is up says how to bring one up."""

from __future__ import annotations

from pathlib import Path

import pytest

from skyhop.optimizer import NoFeasibleOfferingError, optimize
from skyhop.providers.ssh import deployment
from skyhop.providers.ssh.inventory import Inventory
from skyhop.spec import Resources, Task
from tests.optimizer.catalogs import catalog_set


def test_no_pool_points_to_ssh_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # No pools loaded: this process may hold pool 'lab' already (``tests/ssh``'s ``lab_pool``, which
    # ran first in this pytest-xdist worker).
    monkeypatch.setenv("SKYHOP_HOME", str(tmp_path / "skyhop"))
    monkeypatch.setattr(deployment, "_loaded", Inventory())
    task = Task(run="x", resources=Resources(infra="ssh/lab"))
    with pytest.raises(
        NoFeasibleOfferingError, match="no SSH node pool 'lab' is up; register hosts with: skyhop ssh up"
    ):
        optimize(task, catalog_set(tmp_path))
