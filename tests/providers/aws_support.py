"""moto's EC2 server on a loopback port, with boto3's standard files pointing at it.

The worker process reads ``~/.aws/config`` (``endpoint_url``) and ``~/.aws/credentials`` like any
boto3 program, so nothing AWS-specific is configured in skyhop. ``MotoFaults`` changes what moto's
``RunInstances`` does, the way a capacity shortage or a slow API would: the server runs in this
process, so a patch here reaches the worker's calls too. ``InstanceHosts`` makes moto's instances
real machines: each new one gets the address of a free sshd test host, and terminating it stops
the host.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from unittest import mock

import boto3
import requests

from skyhop.providers.cloud import CLUSTER_TAG
from tests.helpers import free_port

if TYPE_CHECKING:
    from tests.ssh.hosts import SSHHost

__all__ = ["InstanceHosts", "MotoFaults", "aws_instances", "moto_server", "reclaim_spot", "reset"]


class MotoFaults:
    """Faults injected into moto's RunInstances: a zone out of capacity, a slow rank."""

    def __init__(self) -> None:
        self.full_zones: set[str] = set()
        self.delay_s = 0.0
        self.calls = 0
        self.block_devices: list[Any] = []
        """Each RunInstances call's block device mappings, as moto parsed them off the wire."""
        self.lock = threading.Lock()

    def install(self) -> contextlib.AbstractContextManager[None]:
        from moto.ec2.exceptions import EC2ClientError
        from moto.ec2.models.instances import InstanceBackend

        original = InstanceBackend.run_instances
        faults = self

        def run_instances(backend: Any, *args: Any, **kwargs: Any) -> Any:
            with faults.lock:
                faults.calls += 1
                faults.block_devices.append(kwargs.get("block_device_mappings"))
            zone = kwargs.get("placement")
            if zone in faults.full_zones:
                raise EC2ClientError(
                    "InsufficientInstanceCapacity",
                    f"We currently do not have sufficient capacity in the Availability Zone ({zone}).",
                )
            if faults.delay_s:
                time.sleep(faults.delay_s)
            return original(backend, *args, **kwargs)

        @contextlib.contextmanager
        def patched() -> Iterator[None]:
            InstanceBackend.run_instances = run_instances  # type: ignore[method-assign]
            try:
                yield
            finally:
                InstanceBackend.run_instances = original  # type: ignore[method-assign]

        return patched()


class InstanceHosts:
    """moto's instances as sshd test hosts: RunInstances gives each new instance a free host's address
    (public and private), TerminateInstances kills the host's processes, as the machine goes away.

    With no free host left, RunInstances fails for want of capacity.
    """

    def __init__(self, hosts: list[SSHHost]) -> None:
        self.free = list(hosts)
        self.taken: dict[str, SSHHost] = {}
        """Instance id -> the host it runs on."""
        self.lock = threading.Lock()

    @contextlib.contextmanager
    def install(self) -> Iterator[None]:
        from moto.ec2.exceptions import EC2ClientError
        from moto.ec2.models.instances import InstanceBackend

        run_original, terminate_original = InstanceBackend.run_instances, InstanceBackend.terminate_instances
        pool = self

        def run_instances(backend: Any, *args: Any, **kwargs: Any) -> Any:
            with pool.lock:
                if not pool.free:
                    raise EC2ClientError("InsufficientInstanceCapacity", "no free test host for an instance")
                reservation = run_original(backend, *args, **kwargs)
                for instance in reservation.instances:
                    host = pool.free.pop(0)
                    nic = instance.nics[0]
                    nic.public_ip = nic.private_ip_address = host.address
                    pool.taken[instance.id] = host
            return reservation

        def terminate_instances(backend: Any, instance_ids: list[str]) -> Any:
            ended = terminate_original(backend, instance_ids)
            with pool.lock:
                gone = [pool.taken.pop(instance.id) for instance, _ in ended if instance.id in pool.taken]
            for host in gone:
                host.kill()
            return ended

        with (
            mock.patch.object(InstanceBackend, "run_instances", run_instances),
            mock.patch.object(InstanceBackend, "terminate_instances", terminate_instances),
        ):
            yield


@contextlib.contextmanager
def moto_server(home: Path, address: str = "127.0.0.1") -> Iterator[str]:
    """Start moto on a free port of ``address``, write ``~/.aws`` for it; stop and remove both after."""
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address=address, port=port, verbose=False)
    server.start()
    endpoint = f"http://{address}:{port}"
    aws = home / ".aws"
    aws.mkdir(exist_ok=True)
    (aws / "config").write_text(f"[default]\nregion = us-east-1\nendpoint_url = {endpoint}\n")
    (aws / "credentials").write_text(
        "[default]\naws_access_key_id = testing\naws_secret_access_key = testing\n"
    )
    try:
        yield endpoint
    finally:
        (aws / "config").unlink(missing_ok=True)
        (aws / "credentials").unlink(missing_ok=True)
        server.stop()


def reset(endpoint: str) -> None:
    """Forget every resource moto holds."""
    requests.post(f"{endpoint}/moto-api/reset", timeout=10).raise_for_status()


def aws_instances(region: str = "us-east-1", cluster: str | None = None) -> list[dict[str, Any]]:
    """Instances that are not terminated, counted through the EC2 API as a user would."""
    ec2 = boto3.session.Session().client("ec2", region_name=region)
    filters = [{"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped"]}]
    if cluster:
        filters.append({"Name": f"tag:{CLUSTER_TAG}", "Values": [cluster]})
    reservations = ec2.describe_instances(Filters=filters)["Reservations"]
    return [i for r in reservations for i in r["Instances"]]


def reclaim_spot(instance_id: str, region: str = "us-east-1") -> None:
    """Terminate a spot instance as EC2 does when it takes the capacity back (moto runs in this process)."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.ec2.models import ec2_backends
    from moto.ec2.models.instances import StateReason

    instance = ec2_backends[DEFAULT_ACCOUNT_ID][region].get_instance(instance_id)
    instance.terminate()
    instance.state_reason = StateReason(
        "Server.SpotInstanceTermination: Spot instance termination", "Server.SpotInstanceTermination"
    )
