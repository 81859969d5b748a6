"""The cloud SDKs and OR-Tools are extras: a base install imports, lists, plans and checks without them."""

from __future__ import annotations

import json
import os
import pkgutil
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from skyhop.providers.extras import EXTRAS
from tests.conftest import REPO, skyhop
from tests.helpers import cli_imports
from tests.sdk_blocker import BLOCKED, blocked_env

PACKAGES = ["spec", "optimizer", "providers", "contract", "activities", "workflows", "cli"]


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=\[; ]", r, maxsplit=1)[0].lower() for r in requirements}


def test_every_extra_in_the_code_is_declared_in_pyproject() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras: dict[str, list[str]] = project["optional-dependencies"]
    base = _names(project["dependencies"])
    for extra, modules in EXTRAS.items():
        assert set(modules.values()) <= _names(extras[extra]), extra
        assert not _names(extras[extra]) & base, f"{extra} is in the base install too"
    assert "kubernetes" not in base
    clouds = sorted(set(extras) - {"all", "test", "bench"})  # bench: benchmarks/load_balancer.py's peers
    assert extras["all"] == [f"skyhop[{','.join(['aws', 'gcp', 'azure', 'kubernetes', 'dag'])}]"]
    assert sorted(["aws", "gcp", "azure", "kubernetes", "dag"]) == clouds
    assert "skyhop[all]" in extras["test"]


def _python(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True, text=True, timeout=120
    )


@pytest.fixture
def base_env(tmp_path: Path) -> dict[str, str]:
    """A home of its own (``check`` records verdicts there) in which no extra can be imported."""
    env = {**os.environ, "HOME": str(tmp_path), "SKYHOP_HOME": str(tmp_path / ".skyhop")}
    return blocked_env(tmp_path / "blocker", env)


def test_every_module_imports_without_the_extras(base_env: dict[str, str]) -> None:
    modules = ["skyhop.worker"] + [
        info.name
        for package in PACKAGES
        for info in pkgutil.walk_packages([str(REPO / package)], prefix=f"skyhop.{package}.")
        if not info.name.endswith("__main__")
    ]
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}: importlib.import_module(name)\n"
        f"assert not [m for m in sys.modules if m.startswith({BLOCKED!r})], 'blocked module loaded'\n"
        "print('ok', len(sys.modules))"
    )
    result = _python(code, base_env)
    assert result.returncode == 0, result.stderr
    assert len(modules) > 50 and result.stdout.startswith("ok")


def test_the_cli_path_never_imports_a_cloud_sdk_with_them_installed() -> None:
    """Listing and planning read catalogs only: no boto3 & co., even where they are installed."""
    commands = (
        ["--help"],
        ["launch", "--dryrun", "examples/hello.yaml"],
        ["show-gpus"],
        ["optimize", "examples/gpu.yaml"],
    )
    for args in commands:
        heavy = sorted(m for m in cli_imports(*args) if m.startswith(BLOCKED))
        assert not heavy, f"skyhop {' '.join(args)} imported {heavy[:5]}"


def test_base_install_commands_work_and_name_the_extra(base_env: dict[str, str]) -> None:
    for args in (["--help"], ["launch", "--dryrun", "examples/hello.yaml"], ["show-gpus"]):
        result = skyhop(*args, env=base_env)
        assert result.returncode == 0, (args, result.stderr)
    planned = skyhop("optimize", "examples/gpu.yaml", env=base_env)  # catalogs ship with the package
    assert planned.returncode == 0 and "A100" in planned.stdout, planned.stderr

    pricing = skyhop("catalog", "update", "--cloud", "aws", env=base_env)
    assert pricing.returncode == 1 and "Traceback" not in pricing.stderr
    assert "AWS pricing needs boto3: pip install 'skyhop[aws]'" in pricing.stderr

    checked = skyhop("check", "--json", env=base_env)
    assert checked.returncode == 0, checked.stderr
    listing = json.loads(checked.stdout)
    assert listing["kind"] == "providers"
    verdicts = {item["provider"]: item for item in listing["items"]}
    assert verdicts["local"]["enabled"]
    assert verdicts["aws"] == {
        "provider": "aws",
        "enabled": False,
        "reason": "aws needs boto3: pip install 'skyhop[aws]'",
        "hint": "",
    }
    assert verdicts["gcp"]["reason"] == "gcp needs google-cloud-compute: pip install 'skyhop[gcp]'"
    assert verdicts["azure"]["reason"].startswith("azure needs azure-mgmt-compute, ")
    table = skyhop("check", env=base_env)
    assert "pip install 'skyhop[gcp]'" in table.stdout + table.stderr


def test_a_chain_that_moves_data_names_the_dag_extra(base_env: dict[str, str], tmp_path: Path) -> None:
    chain = tmp_path / "chain.yaml"
    chain.write_text(
        "name: prep\nresources: {cpus: 2}\noutputs: {/data: 100}\nrun: echo prep\n---\n"
        "name: train\nresources: {cpus: 2}\nrun: echo train\n"
    )
    result = skyhop("optimize", str(chain), env=base_env)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "needs ortools: pip install 'skyhop[dag]'" in result.stderr


def test_a_provision_attempt_without_the_sdk_blocks_the_provider(base_env: dict[str, str]) -> None:
    """The real activity, as the worker runs it: a provider-scope failure that created nothing."""
    code = """
import asyncio
from temporalio.testing import ActivityEnvironment
from skyhop.activities.provisioning import provision_attempt
from skyhop.providers.base import Offering, ProvisionRequest

offering = Offering(provider="aws", region="us-east-1", zone="us-east-1a", instance_type="m5.large",
                    cpus=2, memory_gib=8, price=0.1)
request = ProvisionRequest(cluster_name="c", offering=offering, num_nodes=1, attempt_id="a")
outcome = asyncio.run(ActivityEnvironment().run(provision_attempt, request))
print(outcome.failure.model_dump_json())
"""
    result = _python(code, base_env)
    assert result.returncode == 0, result.stderr
    failure = json.loads(result.stdout.strip().splitlines()[-1])
    assert failure["scope"] == "provider" and failure["kind"] == "not installed"
    assert failure["message"] == "aws needs boto3: pip install 'skyhop[aws]'"
    assert failure["leftover"] is False
