"""The task-field flags of ``launch``, ``exec`` and ``jobs launch`` become ``TaskOverrides`` in one place."""

from __future__ import annotations

from typing import Any

import pytest

from skyhop.cli.options import task_overrides

FLAGS: dict[str, Any] = dict(
    name="t", workdir=None, num_nodes=2, cpus="4+", memory=None, gpus=None, env=["A=1"]
)


def test_the_env_flag_becomes_the_overrides_envs() -> None:
    """``--env`` arrives as ``env``: it must reach ``envs``, not be dropped as an unknown field."""
    overrides = task_overrides(**FLAGS, use_spot=True)
    assert overrides.envs == ["A=1"]
    assert (overrides.num_nodes, overrides.cpus, overrides.use_spot) == (2, "4+", True)


def test_a_flag_under_a_wrong_name_is_refused() -> None:
    with pytest.raises(TypeError):
        task_overrides(**FLAGS, spot=True)  # type: ignore[call-arg]
