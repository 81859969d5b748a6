"""The header document of a multi-task file: ``name`` and ``execution: serial|parallel``, nothing else."""

from __future__ import annotations

from pathlib import Path

import pytest

from skyhop.spec import Execution, SpecError, load_dag, load_task


def _dag(tmp_path: Path, text: str) -> object:
    path = tmp_path / "job.yaml"
    path.write_text(text)
    return load_dag(str(path))


def test_a_parallel_header_makes_a_group_with_no_data_flow(tmp_path: Path) -> None:
    dag = _dag(tmp_path, "name: grp\nexecution: parallel\n---\nname: a\nrun: a\n---\nname: b\nrun: b\n")
    assert dag.name == "grp" and dag.execution == Execution.PARALLEL  # type: ignore[attr-defined]
    assert [n.task.name for n in dag.tasks] == ["a", "b"] and dag.edges == []  # type: ignore[attr-defined]


def test_a_serial_header_or_none_is_a_chain(tmp_path: Path) -> None:
    for header in ("name: pipe\nexecution: serial\n---\n", "name: pipe\n---\n", "execution: serial\n---\n"):
        dag = _dag(tmp_path, header + "run: a\n---\nrun: b\n")
        assert dag.execution == Execution.SERIAL and dag.edges == [(0, 1)]  # type: ignore[attr-defined]


def test_a_header_in_front_of_one_task_leaves_it_one_task(tmp_path: Path) -> None:
    path = tmp_path / "one.yaml"
    path.write_text("execution: parallel\n---\nrun: echo hi\n")
    assert load_task(str(path)).run == "echo hi"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "name: g\nexecution: together\n---\nrun: a\n",
            "execution: must be one of serial, parallel, got 'together'",
        ),
        (
            "name: g\nexecution: parallel\nretries: 3\n---\nrun: a\n",
            "retries: unknown field in the header document; it holds only name, execution",
        ),
        ("execution: parallel\n", "no task document"),
        (f"name: {'x' * 300}\nexecution: parallel\n---\nrun: a\n", "name: at most"),
    ],
)
def test_a_bad_header_is_one_line_naming_the_field(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(SpecError) as info:
        _dag(tmp_path, text)
    assert expected in str(info.value) and "\n" not in str(info.value)
