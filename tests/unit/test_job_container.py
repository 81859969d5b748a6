"""Where ``image_id: docker:IMAGE`` runs: in docker/podman on a node, or as the node itself (a pod)."""

from __future__ import annotations

import pytest

from skyhop.activities.node_jobs import job_container
from skyhop.providers.base import ClusterHandle, Offering
from skyhop.providers.runtime.jobs import ContainerStage
from skyhop.spec import Resources, Task


@pytest.mark.parametrize(("provider", "in_docker"), [("sim", True), ("kubernetes", False)])
def test_a_container_starts_on_the_node_unless_the_node_already_is_it(provider: str, in_docker: bool) -> None:
    offering = Offering(provider=provider, instance_type="n", cpus=4, memory_gib=16, price=0)
    handle = ClusterHandle(cluster_name="c", offering=offering, nodes=[])
    task = Task(run="x", resources=Resources(docker_image="ubuntu:24.04"))
    container = job_container(handle, task, ContainerStage.RUN)
    assert (container is not None) == in_docker
    assert container is None or container.image == "ubuntu:24.04"


def test_the_tasks_docker_run_options_reach_the_container_command_line() -> None:
    from skyhop.providers.runtime import node_runner
    from skyhop.spec.task_config import DockerConfig, TaskConfig

    offering = Offering(provider="sim", instance_type="n", cpus=4, memory_gib=16, price=0)
    handle = ClusterHandle(cluster_name="c", offering=offering, nodes=[])
    config = TaskConfig(docker=DockerConfig(run_options=["--shm-size=8g", "-v /data:/mnt/data"]))
    task = Task(run="x", resources=Resources(docker_image="ubuntu:24.04"), config=config)
    container = job_container(handle, task, ContainerStage.SETUP)
    assert container is not None and container.run_options == ["--shm-size=8g", "-v", "/data:/mnt/data"]
    argv = node_runner.container_argv("/x/docker", "n", "img", "s", [], "/h", "/h/w", container.model_dump())
    assert argv[-8:] == ["--shm-size=8g", "-v", "/data:/mnt/data", "-w", "/h/w", "img", "-c", "s"]
    assert argv.index("--shm-size=8g") > argv.index("--ipc")  # after skyhop's own options
