"""Resources forms: accelerator sets and lists, any_of/ordered, names, and one-line field errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from skyhop.spec import Resources, SpecError, task_from_dict


def _alternatives(resources: dict[str, object]) -> list[dict[str, object]]:
    r = Resources.model_validate(resources)
    return [a.model_dump(exclude_defaults=True) for a in r.alternatives]


def test_single_accelerator_forms_normalise_to_one_mapping() -> None:
    for raw in ("A100:8", {"A100": 8}, {"a100": 8}, ["A100:8"]):
        assert Resources.model_validate({"accelerators": raw}).accelerators == {"A100": 8.0}
    assert Resources.model_validate({"accelerators": "a100-80gb"}).accelerators == {"A100-80GB": 1.0}


def test_a_set_is_any_of_and_a_list_is_ordered() -> None:
    pooled = Resources.model_validate({"accelerators": {"A100:1": None, "L4:1": None}})
    assert pooled.any_of is not None and pooled.ordered is None
    assert _alternatives({"accelerators": ["L4", "T4:2"]}) == [
        {"accelerators": {"L4": 1.0}},
        {"accelerators": {"T4": 2.0}},
    ]
    assert Resources.model_validate({"accelerators": ["L4", "T4"]}).ordered is not None


def test_items_inherit_outer_fields_and_location_overrides_as_a_whole() -> None:
    alternatives = _alternatives(
        {
            "infra": "aws/us-east-1",
            "cpus": "4+",
            "any_of": [{"accelerators": "A10G"}, {"cloud": "gcp", "use_spot": True}],
        }
    )
    assert alternatives == [
        {"infra": "aws/us-east-1", "cpus": "4+", "accelerators": {"A10G": 1.0}},
        {"infra": "gcp", "cpus": "4+", "use_spot": True},
    ]


def test_a_set_with_any_of_crosses_them() -> None:
    alternatives = _alternatives(
        {"accelerators": {"A100:1": None, "L4:1": None}, "any_of": [{"infra": "gcp"}, {"infra": "azure"}]}
    )
    assert [(a["infra"], a["accelerators"]) for a in alternatives] == [
        ("gcp", {"A100": 1.0}),
        ("gcp", {"L4": 1.0}),
        ("azure", {"A100": 1.0}),
        ("azure", {"L4": 1.0}),
    ]


def test_choices_survive_a_json_round_trip() -> None:
    r = Resources.model_validate(
        {"cpus": 8, "ordered": [{"accelerators": "H100:8"}, {"infra": "azure", "use_spot": True}]}
    )
    assert Resources.model_validate_json(r.model_dump_json()) == r
    assert Resources.model_validate(r.model_dump(exclude_defaults=True)) == r
    assert r.describe() == "[8 CPU, H100:8] > [8 CPU]"


@pytest.mark.parametrize(
    ("resources", "field", "message"),
    [
        (
            {"accelerators": "A100:x"},
            "resources.accelerators",
            "accelerators must look like 'A100' or 'A100:8'",
        ),
        ({"any_of": [{"cpus": "lots"}]}, "resources.any_of.0.cpus", "cpus must be a positive number"),
        (
            {"any_of": [{"infra": "gcp"}], "ordered": [{"infra": "aws"}]},
            "resources",
            "use either 'any_of' or 'ordered'",
        ),
        (
            {"accelerators": ["A100", "L4"], "any_of": [{"infra": "gcp"}]},
            "resources",
            "a list of accelerators is already an order",
        ),
        ({"any_of": [{"any_of": [{"cpus": 2}]}]}, "resources", "cannot contain 'any_of' or 'ordered'"),
        ({"any_of": []}, "resources", "'any_of' must list at least one alternative"),
        ({"ordered": [{"gpu": "A100"}]}, "resources.ordered.0.gpu", "unknown field"),
    ],
)
def test_bad_choices_are_one_line_with_the_field_path(
    resources: dict[str, object], field: str, message: str
) -> None:
    with pytest.raises(SpecError) as info:
        task_from_dict({"resources": resources}, Path("."))
    assert info.value.field == field
    assert message in str(info.value)
    assert "\n" not in str(info.value)
