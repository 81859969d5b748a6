"""``skyhop check``: every provider's credentials, the cached verdicts, and what the optimizer may use."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from skyhop.providers.registry import provider_names, read_checks, write_checks
from skyhop.providers.sim import SimCloud
from tests.conftest import skyhop
from tests.providers.aws_support import moto_server


@pytest.fixture
def restore_checks() -> Iterator[None]:
    before = read_checks()
    yield
    write_checks(before)
    SimCloud().plan_path.unlink(missing_ok=True)


def test_check_enables_providers_whose_credentials_work(restore_checks: None) -> None:
    SimCloud().root.mkdir(parents=True, exist_ok=True)
    SimCloud().plan_path.write_text("faults: []\n")
    with moto_server(Path(os.environ["HOME"])):
        done = skyhop("check", "--json", env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    verdicts = {item["provider"]: item for item in json.loads(done.stdout)["items"]}
    assert verdicts["aws"]["enabled"] and "authenticated as arn:aws" in verdicts["aws"]["reason"]
    assert verdicts["sim"]["enabled"] and verdicts["local"]["enabled"]
    assert {"aws", "sim", "local"} <= set(provider_names())
    assert read_checks()["aws"].enabled


def test_check_disables_providers_without_credentials_and_says_how_to_fix(restore_checks: None) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        AWS_SHARED_CREDENTIALS_FILE="/nonexistent",
        AWS_CONFIG_FILE="/nonexistent",
        AWS_EC2_METADATA_DISABLED="true",
    )
    done = skyhop("check", env=env)
    assert done.returncode == 0, done.stderr  # local is always there
    lines = {line.split()[0]: line for line in done.stdout.splitlines()[1:]}
    assert "disabled" in lines["aws"] and "no AWS credentials found" in lines["aws"]
    assert "disabled" in lines["sim"] and "enabled" in lines["local"]
    assert "aws: run 'aws configure'" in done.stderr
    assert "Traceback" not in done.stderr
    names = provider_names()
    assert "aws" not in names and "sim" not in names and "local" in names
