"""The nodes a launch (and a start) brings up are the alternative the plan chose, on moto's EC2.

``any_of: [spot with its own image, on-demand]``: the plan picks the spot alternative at its
spot price; the instance must be spot and boot that image, not the outer resources' defaults,
and a start that must re-create a node re-creates the same kind of node.
"""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest
import yaml

from tests.conftest import skyhop
from tests.helpers import DevServer, WorkerProcess, wait_for
from tests.integration.support import unique_cluster
from tests.providers.aws_support import MotoFaults, aws_instances

pytestmark = pytest.mark.integration


def _image(moto: str) -> str:
    """An image moto knows that is not the Ubuntu default a launch without ``image_id`` boots."""
    ec2 = boto3.session.Session().client("ec2", region_name="us-east-1")
    images = ec2.describe_images(Owners=["amazon"])["Images"]
    return str(sorted(i["ImageId"] for i in images)[0])


def _task(tmp_path: Path, image: str) -> Path:
    spot = {"infra": "aws/us-east-1", "cpus": "8+", "use_spot": True, "image_id": image}
    task = {"resources": {"any_of": [spot, {"infra": "aws/us-east-1", "cpus": "8+"}]}}
    path = tmp_path / "task.yaml"
    path.write_text(yaml.safe_dump(task))
    return path


def _assert_spot_with(instance: dict[str, object], image: str) -> None:
    assert instance.get("InstanceLifecycle") == "spot", instance
    assert instance["ImageId"] == image


def test_dryrun_plans_the_spot_alternative_with_its_image(
    cli_env: dict[str, str], faults: MotoFaults, moto: str, tmp_path: Path
) -> None:
    image = _image(moto)
    done = skyhop("launch", "--dryrun", "--json", str(_task(tmp_path, image)), env=cli_env)
    assert done.returncode == 0, done.stderr
    (item,) = json.loads(done.stdout)["items"]
    assert (item["use_spot"], item["image_id"]) == (True, image)
    chosen = item["candidates"][0]
    assert chosen["chosen"] and chosen["use_spot"] and chosen["image_id"] == image


def test_launch_provisions_the_alternative_the_plan_chose(
    temporal_server: DevServer,
    live_worker: WorkerProcess,
    cli_env: dict[str, str],
    faults: MotoFaults,
    moto: str,
    tmp_path: Path,
) -> None:
    image = _image(moto)
    cluster = unique_cluster("spotalt")
    done = skyhop("launch", "-y", "-c", cluster, str(_task(tmp_path, image)), env=cli_env)
    assert done.returncode == 0, done.stderr
    (instance,) = aws_instances(cluster=cluster)
    _assert_spot_with(instance, image)
    gone = skyhop("down", "-y", cluster, env=cli_env)
    assert gone.returncode == 0, gone.stderr
    assert aws_instances(cluster=cluster) == []


def test_start_recreates_a_lost_node_as_the_launch_made_it(
    temporal_server: DevServer,
    live_worker: WorkerProcess,
    cli_env: dict[str, str],
    faults: MotoFaults,
    moto: str,
    tmp_path: Path,
) -> None:
    image = _image(moto)
    cluster = unique_cluster("spotstart")
    done = skyhop("launch", "-y", "-c", cluster, str(_task(tmp_path, image)), env=cli_env)
    assert done.returncode == 0, done.stderr
    (first,) = aws_instances(cluster=cluster)
    stopped = skyhop("stop", "-y", cluster, env=cli_env)
    assert stopped.returncode == 0, stopped.stderr
    # The stopped node disappears outside skyhop (reclaimed, say): start must re-create it.
    ec2 = boto3.session.Session().client("ec2", region_name="us-east-1")
    ec2.terminate_instances(InstanceIds=[first["InstanceId"]])
    wait_for(lambda: aws_instances(cluster=cluster) == [], 60, "the node to be gone")
    started = skyhop("start", "-y", cluster, env=cli_env)
    assert started.returncode == 0, started.stderr
    (again,) = aws_instances(cluster=cluster)
    assert again["InstanceId"] != first["InstanceId"]
    assert again["Placement"] == first["Placement"]
    _assert_spot_with(again, image)
    gone = skyhop("down", "-y", cluster, env=cli_env)
    assert gone.returncode == 0, gone.stderr
