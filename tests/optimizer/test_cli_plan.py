"""``launch --dryrun [--json]``, ``optimize``, ``show-gpus``, ``catalog update`` through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from skyhop.cli.app import app
from tests.optimizer.catalogs import AWS, AZURE, GCP, write

runner = CliRunner()


@pytest.fixture(autouse=True)
def catalogs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "catalogs"
    for provider, rows in (("aws", AWS), ("gcp", GCP), ("azure", AZURE)):
        write(folder, provider, rows)
    monkeypatch.setenv("SKYHOP_CATALOG_DIR", str(folder))
    return folder


def _yaml(tmp_path: Path, text: str) -> str:
    path = tmp_path / "task.yaml"
    path.write_text(text)
    return str(path)


def test_dryrun_json_is_one_document_with_the_choice_and_candidates(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["launch", "--dryrun", "--json", _yaml(tmp_path, "resources: {accelerators: V100}\n")]
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    (task,) = doc["items"]
    assert (task["provider"], task["region"], task["zone"], task["instance_type"]) == (
        "gcp",
        "us-central1",
        "us-central1-a",
        "n1-highmem-8",
    )
    assert task["accelerators"] == {"V100": 1.0} and task["use_spot"] is False
    assert task["hourly_cost"] == pytest.approx(2.95)
    assert task["candidates"][0]["chosen"] and {c["provider"] for c in task["candidates"]} == {"gcp", "azure"}


def test_dryrun_table_marks_the_choice_and_shows_runner_ups(tmp_path: Path) -> None:
    result = runner.invoke(app, ["launch", "--dryrun", "--gpus", "T4", _yaml(tmp_path, "run: nvidia-smi\n")])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split()[:2] == ["INFRA", "INSTANCE"]
    # g4dn.xlarge and NC4as_T4_v3 tie at $0.526: "aws" sorts first.
    assert lines[1].startswith("aws") and lines[1].rstrip().endswith("✔")
    assert lines[2].startswith("azure") and not lines[2].rstrip().endswith("✔")
    assert "Estimated cost: $0.5260 / hour" in result.output


def test_optimize_alias_places_a_chain(tmp_path: Path) -> None:
    chain = "name: c\n---\nname: a\nresources: {cpus: 4+}\n---\nname: b\nresources: {accelerators: T4}\n"
    result = runner.invoke(app, ["optimize", "--json", _yaml(tmp_path, chain)])
    assert result.exit_code == 0, result.output
    assert [t["name"] for t in json.loads(result.stdout)["items"]] == ["a", "b"]


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--minimize", "speed"], 2, "--minimize must be 'cost' or 'time'"),
        (["--gpus", "H100:16"], 1, "no offering has 16 H100 on one node; the most is 8 on aws p5.48xlarge"),
        (["--cpus", "many"], 2, "resources.cpus: cpus must be a positive number"),
    ],
)
def test_errors_are_one_line_with_an_exit_code(
    tmp_path: Path, args: list[str], code: int, message: str
) -> None:
    result = runner.invoke(app, ["launch", "--dryrun", *args, _yaml(tmp_path, "run: x\n")])
    assert result.exit_code == code
    assert message in result.output and "Traceback" not in result.output


def test_show_gpus_lists_counts_and_cheapest_prices() -> None:
    result = runner.invoke(app, ["show-gpus", "--json", "T4"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["items"]
    # The GCP T4 is priced with the N1 host the optimizer would pick (4+ vCPUs, 16+ GiB).
    assert [(r["provider"], r["instance_type"], r["price"]) for r in rows] == [
        ("aws", "g4dn.xlarge", 0.526),
        ("azure", "Standard_NC4as_T4_v3", 0.526),
        ("gcp", "n1-standard-8", pytest.approx(0.38 + 0.35)),
    ]
    assert {r["provider"] for r in rows} == {"aws", "gcp", "azure"}
    summary = runner.invoke(app, ["show-gpus"])
    assert summary.exit_code == 0 and "H100" in summary.stdout
    assert runner.invoke(app, ["show-gpus", "B200"]).exit_code == 1


def test_show_gpus_rows_price_one_instance_type_and_say_where_each_price_is() -> None:
    def rows(*argv: str) -> list[dict[str, object]]:
        result = runner.invoke(app, ["show-gpus", "--json", *argv])
        assert result.exit_code == 0, result.output
        return [r for r in json.loads(result.stdout)["items"] if r["provider"] == "aws"]

    # g5.2xlarge has the cheaper spot price, but the row is g5.xlarge's: its own spot price.
    ((a10g),) = rows("A10G:1")
    assert (a10g["instance_type"], a10g["price"], a10g["spot_price"]) == ("g5.xlarge", 1.006, 0.40)
    # The on-demand price is the same in both regions; spot is cheaper in us-west-2, and says so.
    ((h100),) = rows("H100:8")
    assert (h100["region"], h100["spot_region"], h100["spot_price"]) == ("us-east-1", "us-west-2", 38.0)
    by_region = {r["region"]: r for r in rows("H100:8", "--all")}
    assert (
        by_region["us-east-1"]["spot_price"] == 40.0 and by_region["us-east-1"]["spot_region"] == "us-east-1"
    )
    table = runner.invoke(app, ["show-gpus", "H100:8"]).stdout.splitlines()
    assert table[0].split()[-3:] == ["SPOT_REGION", "SPOT", "$/HOUR"]
    aws_row = next(line for line in table if " aws " in line)
    assert aws_row.split()[-4:] == ["us-east-1", "98.3200", "us-west-2", "38.0000"]


def test_dryrun_says_which_provider_it_left_out_and_why(tmp_path: Path) -> None:
    task = _yaml(
        tmp_path, "resources: {cpus: 2+, ports: 8080, any_of: [{infra: local}, {infra: aws}]}\nrun: x\n"
    )
    shown = runner.invoke(app, ["optimize", task])
    assert shown.exit_code == 0, shown.output
    assert "Left out: local does not support opening ports" in shown.output
    doc = json.loads(runner.invoke(app, ["launch", "--dryrun", "--json", task]).stdout)
    (item,) = doc["items"]
    assert item["left_out"] == {"local": "local does not support opening ports"}
    assert "local" not in {c["provider"] for c in item["candidates"]}
