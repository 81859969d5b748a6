"""Reading tasks: SkyPilot field names, one-line errors with field paths, CLI overrides."""

from __future__ import annotations

from pathlib import Path

import pytest

from skyhop.spec import SpecError, Task, TaskOverrides, load_task, task_from_dict


def _error(data: object, base: Path = Path(".")) -> str:
    with pytest.raises(SpecError) as info:
        task_from_dict(data, base)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_a_full_task_loads_in_canonical_form(tmp_path: Path) -> None:
    (tmp_path / "wd").mkdir()
    (tmp_path / "data.txt").write_text("x")
    task = task_from_dict(
        {
            "name": "train",
            "workdir": "wd",
            "num_nodes": 2,
            "resources": {"cloud": "local", "cpus": 4, "memory": "16+", "accelerators": "a100-80gb:8"},
            "envs": {"LR": 0.1, "NAME": "x"},
            "file_mounts": {"~/data.txt": "data.txt"},
            "setup": "pip install x",
            "run": "python train.py",
        },
        tmp_path,
    )
    assert task.workdir == str((tmp_path / "wd").resolve())
    assert task.file_mounts == {"~/data.txt": str((tmp_path / "data.txt").resolve())}
    assert task.resources.infra == "local"
    assert (task.resources.cpus, task.resources.memory) == ("4", "16+")
    assert task.resources.accelerators == {"A100-80GB": 8.0}
    assert task.envs == {"LR": "0.1", "NAME": "x"}


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"rnu": "x"}, "rnu: unknown field (did you mean 'run'?)"),
        ({"resources": {"cpu": 4}}, "resources.cpu: unknown field (did you mean 'cpus'?)"),
        ({"resources": {"cpus": "four"}}, "resources.cpus: cpus must be a positive number or '<number>+'"),
        ({"resources": {"memory": "lots"}}, "resources.memory: memory must be GiB like 16"),
        ({"resources": {"infra": "awz"}}, "resources.infra: unknown infra 'awz' (did you mean 'aws'?)"),
        ({"resources": {"accelerators": "A100:x"}}, "resources.accelerators: accelerators must look like"),
        ({"num_nodes": 0}, "num_nodes: Input should be greater than or equal to 1"),
        ({"envs": {"1X": "y"}}, "envs: env name '1X' must match"),
        ({"setup": ["a", "b"]}, "setup: must be a shell script string"),
        ({"workdir": "/nonexistent/dir"}, "workdir: local path '/nonexistent/dir' does not exist"),
        (["run"], "a task must be a mapping of fields, got list"),
        ({"num_nodes": True}, "num_nodes: Input should be a valid integer, got True"),
        ({"resources": {"use_spot": "yes"}}, "resources.use_spot: Input should be a valid boolean"),
        ({"envs": {"A\n": "x"}}, "envs: env name 'A\\n' must match"),
        (
            {"file_mounts": {"~/../../tmp/x": "."}},
            "file_mounts: target '~/../../tmp/x' must not contain '..'",
        ),
        ({"file_mounts": {"a/../../x": "."}}, "must not contain '..'"),
        ({"num_nodes": "x" * 10_000}, "got 'xxxxxxxxxxxx"),
    ],
)
def test_bad_input_names_the_field_and_what_is_allowed(data: object, expected: str) -> None:
    message = _error(data)
    assert expected in message
    # One line a terminal shows whole: the field, the value (clipped) and what is allowed (the
    # resources' 25 field names are the longest such list).
    assert "\n" not in message and len(message) < 350


def test_yaml_errors_name_the_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("run: echo hi\nresources: [\n")
    with pytest.raises(SpecError, match=r"bad.yaml line \d+: not valid YAML"):
        load_task(str(bad))
    with pytest.raises(SpecError, match="cannot read task file"):
        load_task(str(tmp_path / "missing.yaml"))


def test_a_shell_command_is_a_task_that_runs_it() -> None:
    assert load_task("echo hello from $(hostname)") == Task(run="echo hello from $(hostname)")


def test_overrides_replace_fields_and_fill_required_envs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    task = task_from_dict({"envs": {"TOKEN": None}, "resources": {"cpus": "2"}}, tmp_path)
    with pytest.raises(SpecError, match="envs.TOKEN: required but not set; pass --env TOKEN=VALUE"):
        TaskOverrides().apply(task)
    monkeypatch.setenv("FROM_HERE", "yes")
    result = TaskOverrides(cpus="8+", gpus="l4", num_nodes=3, envs=["TOKEN=abc", "FROM_HERE"]).apply(task)
    assert result.resources.cpus == "8+"
    assert result.resources.accelerators == {"L4": 1.0}
    assert result.num_nodes == 3
    assert result.envs == {"TOKEN": "abc", "FROM_HERE": "yes"}
    with pytest.raises(SpecError, match="resources.cpus"):
        TaskOverrides(cpus="-1").apply(task)


@pytest.mark.parametrize(
    ("raw", "minutes", "down"),
    [
        (True, 5, False),
        (10, 10, False),
        ("10h", 600, False),
        ("2d", 2880, False),
        ({"idle_minutes": 3, "down": True}, 3, True),
    ],
)
def test_resources_autostop_forms(raw: object, minutes: int, down: bool) -> None:
    autostop = task_from_dict({"resources": {"autostop": raw}}, Path(".")).resources.autostop
    assert autostop is not None and (autostop.idle_minutes, autostop.down) == (minutes, down)


def test_resources_autostop_off_and_bad() -> None:
    assert task_from_dict({"resources": {"autostop": False}}, Path(".")).resources.autostop is None
    assert "resources.autostop: autostop must be true, minutes, or like '30m'" in _error(
        {"resources": {"autostop": "soon"}}
    )


def test_overrides_reach_every_alternative(tmp_path: Path) -> None:
    task = task_from_dict(
        {"resources": {"any_of": [{"infra": "aws", "accelerators": "A10G"}, {"infra": "gcp", "cpus": 4}]}},
        tmp_path,
    )
    result = TaskOverrides(cpus="16+", gpus="T4:1").apply(task)
    alternatives = result.resources.alternatives
    assert [(a.cloud, a.cpus, a.accelerators) for a in alternatives] == [
        ("aws", "16+", {"T4": 1.0}),
        ("gcp", "16+", {"T4": 1.0}),
    ]


def test_image_id_per_region_limits_the_regions(tmp_path: Path) -> None:
    images = {"eu-west-1": "ami-1", "us-west-2": "ami-2"}
    resources = task_from_dict({"resources": {"image_id": images}}, tmp_path).resources
    assert resources.image_for("us-west-2") == "ami-2" and resources.image_for("us-east-1") is None
    assert resources.allows_region("eu-west-1") and not resources.allows_region("us-east-1")
    plain = task_from_dict({"resources": {"image_id": "ami-3"}}, tmp_path).resources
    assert plain.image_for("anywhere") == "ami-3" and plain.allows_region("anywhere")
    assert "resources.image_id: image_id must be an image name or {region: image name}" in _error(
        {"resources": {"image_id": {"us-east-1": 5}}}
    )
