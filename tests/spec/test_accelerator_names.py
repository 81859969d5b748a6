"""``Inferentia:N`` is either Inferentia generation, as AWS's API and SkyPilot's catalog name both."""

from __future__ import annotations

from pathlib import Path

import pytest

from skyhop.spec import Resources, TaskOverrides
from skyhop.spec.loader import task_from_dict


@pytest.mark.parametrize(
    ("accelerators", "described"),
    [
        ("Inferentia:6", "[INFERENTIA:6] | [INFERENTIA2:6]"),
        ({"A100": 1, "Inferentia": 6}, "[A100:1] | [INFERENTIA:6] | [INFERENTIA2:6]"),
        (["Inferentia:4", "L4"], "[INFERENTIA:4] > [INFERENTIA2:4] > [L4:1]"),
        ("Inferentia2:6", "INFERENTIA2:6"),
        ("A100:8", "A100:8"),
    ],
)
def test_inferentia_is_either_generation_and_survives_a_json_round_trip(
    accelerators: object, described: str
) -> None:
    resources = task_from_dict({"run": "x", "resources": {"accelerators": accelerators}}, Path(".")).resources
    assert resources.describe() == described
    assert Resources.model_validate(resources.model_dump(mode="json")) == resources


def test_the_gpus_flag_reads_inferentia_the_same_way() -> None:
    task = task_from_dict({"run": "x"}, Path("."))
    assert (
        TaskOverrides(gpus="Inferentia:6").apply(task).resources.describe()
        == "[INFERENTIA:6] | [INFERENTIA2:6]"
    )
