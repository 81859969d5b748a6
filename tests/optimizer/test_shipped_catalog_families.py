"""``launch --dryrun --json`` on the shipped catalogs: accelerator families SkyPilot's examples ask for.

Each family is a catalog row set (facts from SkyPilot's v8 catalogs); a name resolves as in SkyPilot,
case-insensitively (``inferentia2`` is ``Inferentia2``), and ``Inferentia`` is either generation, as
AWS's API and so SkyPilot's catalog name both: ``Inferentia:6`` plans on an inf2.24xlarge
(SkyPilot's aws-neuron example), ``Inferentia:1`` on the cheaper inf1.xlarge.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from skyhop.cli.app import app

runner = CliRunner()


@pytest.fixture(autouse=True)
def shipped_catalogs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SKYHOP_CATALOG_DIR", raising=False)


def _dryrun(tmp_path: Path, resources: str) -> tuple[int, str]:
    path = tmp_path / "task.yaml"
    path.write_text(f"resources: {resources}\nrun: x\n")
    result = runner.invoke(app, ["launch", "--dryrun", "--json", str(path)])
    return result.exit_code, result.output


@pytest.mark.parametrize(
    ("resources", "choice"),
    [
        ("{accelerators: L40S}", ("aws", "us-east-1", "g6e.xlarge", {"L40S": 1.0}, 1.861)),
        ("{accelerators: l40s:4}", ("aws", "us-east-1", "g6e.12xlarge", {"L40S": 4.0}, 10.49264)),
        ("{accelerators: L40S:8}", ("aws", "us-east-1", "g6e.48xlarge", {"L40S": 8.0}, 30.13118)),
        ("{accelerators: Inferentia}", ("aws", "us-east-1", "inf1.xlarge", {"Inferentia": 1.0}, 0.228)),
        (
            "{accelerators: Inferentia:6}",
            ("aws", "us-east-1", "inf2.24xlarge", {"Inferentia2": 6.0}, 6.49063),
        ),
        (
            "{accelerators: inferentia2:6}",
            ("aws", "us-east-1", "inf2.24xlarge", {"Inferentia2": 6.0}, 6.49063),
        ),
        ("{accelerators: H200:8}", ("gcp", "europe-west4", "a3-ultragpu-8g", {"H200": 8.0}, 49.4819)),
        (
            "{accelerators: H200:8, infra: azure}",
            ("azure", "eastus2", "Standard_ND96isr_H200_v5", {"H200": 8.0}, 84.8),
        ),
        ("{accelerators: h100-mega:8}", ("gcp", "europe-west1", "a3-megagpu-8g", {"H100-MEGA": 8.0}, 45.808)),
        # A fraction plans on the whole GPU that holds it; the job queue gives the job its share.
        ("{accelerators: K80:0.5}", ("aws", "us-east-1", "p2.xlarge", {"K80": 1.0}, 0.9)),
        ("{accelerators: K80:8}", ("aws", "us-east-1", "p2.8xlarge", {"K80": 8.0}, 7.2)),
        ("{accelerators: V100:0.5, infra: aws}", ("aws", "us-east-1", "p3.2xlarge", {"V100": 1.0}, 3.06)),
        ("{accelerators: T4:0.5, infra: aws}", ("aws", "us-east-1", "g4dn.xlarge", {"T4": 1.0}, 0.526)),
        ("{instance_type: m5.8xlarge, infra: aws}", ("aws", "us-east-1", "m5.8xlarge", {}, 1.536)),
        ("{instance_type: c5.9xlarge}", ("aws", "us-east-1", "c5.9xlarge", {}, 1.53)),
        ("{instance_type: r5.large}", ("aws", "us-east-1", "r5.large", {}, 0.126)),
    ],
)
def test_a_family_plans_on_its_cheapest_row(
    tmp_path: Path, resources: str, choice: tuple[str, str, str, dict[str, float], float]
) -> None:
    code, output = _dryrun(tmp_path, resources)
    assert code == 0, output
    (task,) = json.loads(output)["items"]
    got = (task["provider"], task["region"], task["instance_type"], task["accelerators"], task["hourly_cost"])
    assert got == (*choice[:4], pytest.approx(choice[4]))


@pytest.mark.parametrize(
    ("resources", "message"),
    [
        (
            "{accelerators: Inferentia:5}",
            "[1] no offering has 5 INFERENTIA on one node; the most is 16 on aws inf1.24xlarge; offered: "
            "INFERENTIA:1, INFERENTIA:4, INFERENTIA:16; [2] no offering has 5 INFERENTIA2 on one node;",
        ),
        ("{accelerators: H200:16}", "no offering has 16 H200 on one node; the most is 8 on azure "),
        ("{accelerators: K40}", "no offering has accelerator K40"),
    ],
)
def test_a_request_no_node_has_is_refused_in_one_line(tmp_path: Path, resources: str, message: str) -> None:
    code, output = _dryrun(tmp_path, resources)
    assert code == 1
    assert message in output and len(output.strip().splitlines()) == 1 and "Traceback" not in output
