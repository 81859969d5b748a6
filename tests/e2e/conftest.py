"""An embedded skyhop (its own HOME, server ports, dev server and worker) driven by the real CLI."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import embedded_skyhop


@pytest.fixture(scope="module")
def user_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """One embedded skyhop shared by a module's tests."""
    with embedded_skyhop(tmp_path_factory.mktemp("user")) as env:
        yield env


@pytest.fixture
def fresh_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A user who has never run skyhop."""
    with embedded_skyhop(tmp_path) as env:
        yield env
