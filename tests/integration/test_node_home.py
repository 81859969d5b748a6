"""A node that is a folder (``local``, ``sim``) is the job's home, and nothing a task names leaves it."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.client import WorkflowFailureError

from skyhop.providers.base import NodeHandle
from skyhop.providers.home import skyhop_home
from skyhop.providers.local.runtime import LocalNodeRuntime, OutsideNodeError
from skyhop.providers.sim import SimCloud
from skyhop.spec import Resources, Task
from tests.conftest import run, skyhop
from tests.helpers import DevServer, WorkerProcess
from tests.integration.support import client_for, launch, unique_cluster
from tests.providers.sim_support import enabled_sim

pytestmark = pytest.mark.integration


@pytest.fixture(params=["local", "sim"])
def infra(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Each folder-node provider in turn (the sim enabled for the test)."""
    if request.param == "sim":
        with enabled_sim(tmp_path):
            yield "sim"
    else:
        yield "local"


def _leftovers(cluster: str, infra: str) -> list[Path]:
    """Node folders of the cluster still on disk (local's, or the sim's live instances')."""
    if infra == "sim":
        cloud = SimCloud()
        live = [i["instance_id"] for i in cloud.describe(cluster) if i["state"] != "terminated"]
        return [cloud.node_dir(instance_id) for instance_id in live]
    folder = skyhop_home() / "clusters" / cluster
    return [folder] if folder.exists() else []


def test_a_home_file_mount_is_where_the_job_looks_for_it(
    infra: str, live_worker: WorkerProcess, cli_env: dict[str, str], tmp_path: Path
) -> None:
    cluster = unique_cluster()
    (tmp_path / "wd").mkdir()
    (tmp_path / "data.csv").write_text("a,b\n1,2\n")
    (tmp_path / "task.yaml").write_text(
        f"resources: {{infra: {infra}}}\n"
        "workdir: wd\n"
        "file_mounts: {~/data.csv: data.csv, ~/sub/copy.csv: data.csv}\n"
        "setup: cat ~/data.csv > ~/seen-by-setup\n"
        'run: cat ~/data.csv ~/sub/copy.csv ~/seen-by-setup && echo "cwd=$PWD home=$HOME"\n'
    )
    try:
        result = skyhop("launch", "-y", "-c", cluster, "task.yaml", env=cli_env, cwd=tmp_path)
        assert result.returncode == 0, result.stderr[-2000:]
        assert result.stdout.count("1,2") == 3, result.stdout
        cwd = result.stdout.split("cwd=")[1].split()[0]
        home = result.stdout.split("home=")[1].split()[0]
        assert cwd == str(Path(home) / "workdir")
        assert Path(home, "data.csv").read_text() == "a,b\n1,2\n"
        assert Path(home).resolve() != Path.home().resolve()
    finally:
        skyhop("down", "-y", cluster, env=cli_env)
    assert _leftovers(cluster, infra) == []
    assert not Path(home).exists()


def test_targets_that_would_leave_the_node_are_refused_before_anything_starts(
    infra: str, live_worker: WorkerProcess, cli_env: dict[str, str], tmp_path: Path
) -> None:
    cluster = unique_cluster()
    outside = Path(f"/tmp/skyhop-escape-{uuid.uuid4().hex}")
    (tmp_path / "data.csv").write_text("x")
    for target in (str(outside), f"~/../../../../../../..{outside}"):
        (tmp_path / "task.yaml").write_text(
            f"resources: {{infra: {infra}}}\nfile_mounts: {{'{target}': data.csv}}\nrun: echo ran\n"
        )
        result = skyhop("launch", "-y", "-c", cluster, "task.yaml", env=cli_env, cwd=tmp_path)
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2, result.stderr[-2000:]
        assert len(lines) == 1 and "file_mounts" in lines[0], lines
        assert not outside.exists()
    status = skyhop("status", env=cli_env)
    assert cluster not in status.stdout
    assert _leftovers(cluster, infra) == []


def test_a_worker_refuses_an_absolute_target_from_any_client(
    infra: str, temporal_server: DevServer, live_worker: WorkerProcess
) -> None:
    """A client that skips the CLI's check meets the optimizer's: no provider whose nodes are folders
    here is a candidate, so the launch fails before anything is provisioned; the host file is untouched."""
    cluster = unique_cluster()
    outside = Path(f"/tmp/skyhop-escape-{uuid.uuid4().hex}")
    task = Task(
        resources=Resources(infra=infra), file_mounts={str(outside): str(Path(__file__))}, run="echo ran"
    )

    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        with pytest.raises(WorkflowFailureError) as info:
            await asyncio.wait_for(launch(client, cluster, task), 120)
        chain, error = [], info.value.cause
        while error is not None:
            chain.append(str(error))
            error = getattr(error, "cause", None)
        assert f"{infra} does not support absolute file mount targets" in " ".join(chain)
        assert "is absolute" in " ".join(chain)
        assert not outside.exists()

    run(scenario())
    assert _leftovers(cluster, infra) == []


@pytest.mark.parametrize(
    "target", ["{outside}/x", "~/../outside/x", "a/../../outside/x", "~/link/x", "~/link"]
)
def test_the_node_runtime_keeps_every_path_inside_its_folder(tmp_path: Path, target: str) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "node"
    root.mkdir()
    (root / "link").symlink_to(outside)
    source = tmp_path / "data.txt"
    source.write_text("x")
    runtime = LocalNodeRuntime(NodeHandle(rank=0, instance_id="n", ip="127.0.0.1", runtime_dir=str(root)))
    with pytest.raises(OutsideNodeError):
        run(runtime.put_path(str(source), target.format(outside=outside)))
    assert list(outside.iterdir()) == []
