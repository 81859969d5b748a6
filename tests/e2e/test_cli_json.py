"""Every ``--json`` has one layout: ``{"kind": KIND, "items": [...]}``, snake_case fields throughout."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.conftest import skyhop

pytestmark = pytest.mark.e2e

COMMANDS = {
    "clusters": ["status", "--json"],
    "jobs": ["queue", "--json"],
    "plan": ["launch", "--dryrun", "--json", "--infra", "local", "echo x"],
    "gpus": ["show-gpus", "--json", "T4"],
    "providers": ["check", "--json"],
    "hosts": ["ssh", "status", "--json"],
}
SNAKE_CASE = re.compile(r"^[a-z][a-z0-9_]*$")


def _keys(value: Any, path: str = "") -> list[str]:
    """Every key in a JSON document that is a field name (not a value-keyed map such as accelerators)."""
    if isinstance(value, list):
        return [key for item in value for key in _keys(item, path)]
    if not isinstance(value, dict) or path.endswith(("accelerators", "gpus", "envs", "env")):
        return []
    return [key for k, v in value.items() for key in (f"{path}.{k}", *_keys(v, k))]


def test_every_json_is_a_kind_and_its_items(user_env: dict[str, str]) -> None:
    launched = skyhop("launch", "-y", "-c", "js", "echo x", env=user_env)
    assert launched.returncode == 0, launched.stderr
    for kind, argv in COMMANDS.items():
        done = skyhop(*argv, env=user_env)
        assert done.returncode == 0, (argv, done.stderr)
        doc = json.loads(done.stdout)
        assert list(doc)[:2] == ["kind", "items"] and doc["kind"] == kind, argv
        assert isinstance(doc["items"], list) and all(isinstance(i, dict) for i in doc["items"]), argv
        bad = [key for key in _keys(doc) if not SNAKE_CASE.match(key.rsplit(".", 1)[-1])]
        assert not bad, (argv, bad)
    (cluster,) = json.loads(skyhop("status", "--json", env=user_env).stdout)["items"]
    assert cluster["name"] == "js" and cluster["status"] == "UP"
    (job,) = json.loads(skyhop("queue", "--json", env=user_env).stdout)["items"]
    assert (job["cluster"], job["job_id"], job["status"]) == ("js", 1, "SUCCEEDED")
    plan = json.loads(skyhop(*COMMANDS["plan"], env=user_env).stdout)
    assert plan["items"][0]["provider"] == "local" and "total_cost" in plan
