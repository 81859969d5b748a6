"""A job group's header fields (SkyPilot's): ``primary_tasks``, ``termination_delay``,
``inter_connection``, ``placement``; each refused in one line naming the field when wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from skyhop.spec import Dag, JobGroup, Placement, SpecError, load_dag

_PRIMARY = "primary_tasks: [trainer]\n"
_TASKS = "---\nname: trainer\nrun: a\n---\nname: data-server\nrun: b\n---\nname: buffer\nrun: c\n"


def _group(tmp_path: Path, header: str, tasks: str = _TASKS) -> Dag:
    path = tmp_path / "group.yaml"
    path.write_text("name: rl\nexecution: parallel\n" + header + tasks)
    return load_dag(str(path))


def test_skypilots_coding_agent_header_is_read_whole(tmp_path: Path) -> None:
    header = (
        "primary_tasks: [trainer]\ntermination_delay: 60s\ninter_connection: true\nplacement: SAME_INFRA\n"
    )
    group = _group(tmp_path, header).group
    assert group == JobGroup(
        primary_tasks=["trainer"],
        termination_delays={"default": 60.0},
        inter_connection=True,
        hostnames=True,
        placement=Placement.SAME_INFRA,
        name="rl",
    )
    assert group.is_primary("trainer") and not group.is_primary("buffer")
    assert group.delay_seconds("buffer") == 60.0


def test_without_primary_tasks_every_task_is_primary(tmp_path: Path) -> None:
    group = _group(tmp_path, "").group
    assert group is not None and group.primary_tasks == [] and group.is_primary("buffer")
    assert group.delay_seconds("buffer") == 0.0


@pytest.mark.parametrize(
    ("delay", "seconds"),
    [("30s", 30.0), ("5m", 300.0), ("1h", 3600.0), ("1.5m", 90.0), ("45", 45.0), ("0s", 0.0)],
)
def test_a_termination_delay_is_a_duration(tmp_path: Path, delay: str, seconds: float) -> None:
    group = _group(tmp_path, f"primary_tasks: [trainer]\ntermination_delay: '{delay}'\n").group
    assert group is not None and group.delay_seconds("data-server") == seconds


def test_a_termination_delay_may_differ_per_auxiliary_task(tmp_path: Path) -> None:
    header = "primary_tasks: [trainer]\ntermination_delay: {default: 30s, buffer: 2m}\n"
    group = _group(tmp_path, header).group
    assert group is not None
    assert (group.delay_seconds("buffer"), group.delay_seconds("data-server")) == (120.0, 30.0)


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("primary_tasks: [trainr]\n", "primary_tasks: no task is named 'trainr' (did you mean 'trainer'?)"),
        ("primary_tasks: trainer\n", "primary_tasks: must be a list of task names"),
        ("primary_tasks: [trainer, trainer]\n", "primary_tasks: names a task twice"),
        (_PRIMARY + "termination_delay: soon\n", "termination_delay: must be a duration like 30s"),
        (_PRIMARY + "termination_delay: 3d\n", "termination_delay: must be between 0s and 24h"),
        (
            "primary_tasks: [trainer]\ntermination_delay: {trainer: 5s}\n",
            "termination_delay.trainer: not an auxiliary task (one not in primary_tasks); "
            "allowed: default, data-server, buffer",
        ),
        (_PRIMARY + "termination_delay: {buffer: x}\n", "termination_delay.buffer: must be a duration"),
        ("inter_connection: yes please\n", "inter_connection: must be true or false"),
        ("placement: SAME_ZONE\n", "placement: must be SAME_INFRA, got 'SAME_ZONE'"),
    ],
)
def test_a_bad_group_field_is_one_line_naming_it(tmp_path: Path, header: str, expected: str) -> None:
    with pytest.raises(SpecError) as info:
        _group(tmp_path, header)
    assert str(info.value).startswith(expected) and "\n" not in str(info.value)


def test_primary_tasks_need_distinct_names(tmp_path: Path) -> None:
    tasks = "---\nname: a\nrun: a\n---\nname: a\nrun: b\n"
    with pytest.raises(SpecError, match="primary_tasks: 2 tasks are named 'a'"):
        _group(tmp_path, "primary_tasks: [a]\n", tasks)


def test_a_group_whose_names_make_hostnames_gets_them_unasked_as_in_skypilot(tmp_path: Path) -> None:
    assert _group(tmp_path, "").group == JobGroup(hostnames=True, name="rl")
    unnamed = _group(tmp_path, "", "---\nname: a\nrun: a\n---\nrun: b\n").group
    assert unnamed is not None and not unnamed.hostnames


def test_inter_connection_needs_hostname_names(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="inter_connection: task 2 is named None"):
        _group(tmp_path, "inter_connection: true\n", "---\nname: a\nrun: a\n---\nrun: b\n")
    with pytest.raises(SpecError, match="inter_connection: task 1 is named 'A_b'"):
        _group(tmp_path, "inter_connection: true\n", "---\nname: A_b\nrun: a\n")


def test_group_fields_in_a_pipeline_header_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "pipe.yaml"
    path.write_text("name: p\nprimary_tasks: [a]\n---\nname: a\nrun: a\n---\nname: b\nrun: b\n")
    with pytest.raises(SpecError, match="primary_tasks: only a job group has it: add execution: parallel"):
        load_dag(str(path))
