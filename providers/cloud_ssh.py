"""How the command runner reaches a cloud instance: over SSH, with skyhop's own key, as one login.

Clouds that put skyhop's public key on their instances at creation (an EC2 key pair, GCP
metadata, Azure ``osProfile``) share this: the node handle names the login and the runtime folder under its
home, and the runtime is a ``CloudNodeRuntime`` (SSH) on the public address where there is one. An instance
comes up bare: its node programs are installed when its first job (setup or run) starts.
"""

from __future__ import annotations

from skyhop.providers.base import NodeHandle, NodeRuntime, SshAccess
from skyhop.providers.cloud import Instance
from skyhop.providers.runtime.jobs import JobSpec
from skyhop.providers.ssh.runtime import SSHNodeRuntime, runtime_dir

__all__ = ["CloudNodeRuntime", "ssh_node", "ssh_runtime"]


class CloudNodeRuntime(SSHNodeRuntime):
    """A cloud instance over SSH: each job start first makes sure the node programs are there
    (a check of their hashes; they are copied only when missing or changed)."""

    async def start_job(self, spec: JobSpec) -> None:
        await self.prepare()
        await super().start_job(spec)


def ssh_node(cluster_name: str, instance: Instance, user: str) -> NodeHandle:
    """The handle of one instance whose login is ``user`` (home ``/home/<user>``)."""
    return NodeHandle(
        rank=instance.rank,
        instance_id=instance.instance_id,
        ip=instance.private_ip or instance.public_ip or "",
        access=SshAccess(user=user, public_ip=instance.public_ip),
        runtime_dir=runtime_dir(f"/home/{user}", cluster_name, instance.rank),
    )


def ssh_runtime(node: NodeHandle, default_user: str) -> NodeRuntime:
    """The SSH runtime of a node created by ``ssh_node``."""
    from skyhop.providers.keys import key_paths
    from skyhop.providers.ssh.connection import Endpoint

    access = node.access
    if not isinstance(access, SshAccess):
        raise TypeError(f"node {node.instance_id} is not reached over SSH ({access.kind})")
    endpoint = Endpoint(
        address=access.public_ip or node.ip,
        port=access.port,
        user=access.user or default_user,
        identity_file=str(key_paths()[0]),
    )
    return CloudNodeRuntime(node, endpoint, home=f"/home/{endpoint.user}", has_rsync=True)
