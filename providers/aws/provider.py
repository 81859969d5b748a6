"""``aws``: EC2 through boto3.

Credentials, region defaults and endpoints come from boto3's usual chain (environment,
``~/.aws/credentials``, ``~/.aws/config`` including ``endpoint_url``, instance roles), so skyhop
needs no AWS settings of its own. Each node is one ``RunInstances`` call tagged with the cluster
name and rank, with a client token derived from the attempt, so neither a retried call nor a
retried activity creates a second instance.
"""

from __future__ import annotations

import hashlib
from typing import Any

from skyhop.providers.aws.errors import classify
from skyhop.providers.base import (
    Capabilities,
    ClusterHandle,
    DiskTier,
    NodeHandle,
    NodeRuntime,
    ProvisionRequest,
)
from skyhop.providers.cloud import CLUSTER_TAG, RANK_TAG, Instance, InstanceState
from skyhop.providers.cloud_sdk import SdkCloudProvider
from skyhop.providers.cloud_ssh import ssh_node, ssh_runtime
from skyhop.providers.errors import CredentialsError, ProviderError
from skyhop.providers.keys import key_fingerprint, public_key

__all__ = ["AWSProvider", "key_pair_name"]

SSH_USER = "ubuntu"
_UBUNTU_OWNER = "099720109477"
_UBUNTU_IMAGES = "ubuntu/images/hvm-ssd*/ubuntu-*-22.04-amd64-server-*"
_STATES = {
    "pending": InstanceState.PENDING,
    "running": InstanceState.RUNNING,
    "stopping": InstanceState.STOPPING,
    "stopped": InstanceState.STOPPED,
}


_SPOT_TERMINATION = "Server.SpotInstanceTermination"
"""The state reason code of an instance EC2 terminated to take its spot capacity back."""


def key_pair_name() -> str:
    """The EC2 key pair every worker of the deployment uses: named by the node key's fingerprint."""
    return f"skyhop-{key_fingerprint()}"


def _client_token(request: ProvisionRequest, rank: int) -> str:
    seed = f"{request.attempt_id}|{request.cluster_name}|{request.offering.zone}|{rank}"
    return hashlib.sha256(seed.encode()).hexdigest()[:40]


def _ec2(session: Any, region: str | None) -> Any:
    from botocore.config import Config

    config = Config(retries={"max_attempts": 4, "mode": "standard"}, connect_timeout=10, read_timeout=60)
    return session.client("ec2", region_name=region or "us-east-1", config=config)


def _boto3_session() -> Any:
    import boto3

    return boto3.session.Session()


class AWSProvider(SdkCloudProvider[Any]):
    """EC2 instances in the catalog's regions and zones."""

    name = "aws"
    capabilities = Capabilities(
        spot=True,
        stop_start=True,
        multi_node=True,
        open_ports=True,
        custom_image=True,
        disk_size=True,
        disk_tiers=frozenset(DiskTier),
        labels=True,
    )
    poll_interval_s = 2.0
    setup_hint = "run 'aws configure', or set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"

    def __init__(self) -> None:
        super().__init__(_boto3_session, classify)

    def whoami(self, session: Any) -> str:
        if session.get_credentials() is None:
            raise CredentialsError("no AWS credentials found", "NoCredentials", leftover=False)
        identity = session.client("sts", region_name="us-east-1").get_caller_identity()
        return f"authenticated as {identity.get('Arn', 'unknown')}"

    async def list_instances(self, cluster_name: str, region: str | None) -> list[Instance]:
        def describe(session: Any) -> list[Instance]:
            pages = (
                _ec2(session, region)
                .get_paginator("describe_instances")
                .paginate(
                    Filters=[
                        {"Name": f"tag:{CLUSTER_TAG}", "Values": [cluster_name]},
                        {"Name": "instance-state-name", "Values": list(_STATES)},
                    ]
                )
            )
            found = []
            for page in pages:
                for reservation in page["Reservations"]:
                    for item in reservation["Instances"]:
                        tags = {t["Key"]: t["Value"] for t in item.get("Tags", [])}
                        found.append(
                            Instance(
                                instance_id=item["InstanceId"],
                                rank=int(tags.get(RANK_TAG, "0")),
                                zone=item["Placement"]["AvailabilityZone"],
                                state=_STATES[item["State"]["Name"]],
                                private_ip=item.get("PrivateIpAddress"),
                                public_ip=item.get("PublicIpAddress"),
                            )
                        )
            return found

        return await self._call(describe)

    async def preempted(self, handle: ClusterHandle, gone: list[str]) -> set[str]:
        """Terminated instances whose state reason is EC2's spot interruption (they stay listed for
        about an hour after termination)."""

        def describe(session: Any) -> set[str]:
            pages = (
                _ec2(session, handle.offering.region)
                .get_paginator("describe_instances")
                .paginate(
                    Filters=[
                        {"Name": "instance-id", "Values": gone},
                        {"Name": "instance-state-name", "Values": ["shutting-down", "terminated"]},
                    ]
                )
            )
            return {
                item["InstanceId"]
                for page in pages
                for reservation in page["Reservations"]
                for item in reservation["Instances"]
                if item.get("StateReason", {}).get("Code") == _SPOT_TERMINATION
            }

        return await self._call(describe)

    async def create_instances(self, request: ProvisionRequest, ranks: list[int]) -> None:
        region = request.offering.region
        created = 0

        def run_one(ec2: Any, base: dict[str, Any], rank: int) -> None:
            tags = [
                {"Key": CLUSTER_TAG, "Value": request.cluster_name},
                {"Key": RANK_TAG, "Value": str(rank)},
                {"Key": "Name", "Value": f"{request.cluster_name}-{rank}"},
            ]
            tags += [{"Key": key, "Value": value} for key, value in request.labels.items()]
            ec2.run_instances(
                **base,
                ClientToken=_client_token(request, rank),
                TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
            )

        def create(session: Any) -> None:
            nonlocal created
            ec2 = _ec2(session, region)
            base = self._run_arguments(ec2, request)
            for rank in ranks:
                run_one(ec2, base, rank)
                created += 1

        try:
            await self._call(create)
        except ProviderError as exc:
            exc.leftover = created > 0
            raise

    def _run_arguments(self, ec2: Any, request: ProvisionRequest) -> dict[str, Any]:
        """What every node's RunInstances shares: image, type, key, firewall, disk, market."""
        offering = request.offering
        arguments: dict[str, Any] = {
            "ImageId": request.image_id or self._default_image(ec2),
            "InstanceType": offering.instance_type,
            "MinCount": 1,
            "MaxCount": 1,
            "KeyName": self._key_pair(ec2),
            "SecurityGroupIds": [self._security_group(ec2, request.cluster_name, request.ports)],
        }
        if offering.zone:
            arguments["Placement"] = {"AvailabilityZone": offering.zone}
        if request.disk_size or request.disk_tier:
            arguments["BlockDeviceMappings"] = [
                {"DeviceName": "/dev/sda1", "Ebs": {**ebs_volume(request), "DeleteOnTermination": True}}
            ]
        if request.use_spot:
            arguments["InstanceMarketOptions"] = {
                "MarketType": "spot",
                "SpotOptions": {"SpotInstanceType": "one-time", "InstanceInterruptionBehavior": "terminate"},
            }
        return arguments

    def _default_image(self, ec2: Any) -> str:
        images = ec2.describe_images(
            Owners=[_UBUNTU_OWNER], Filters=[{"Name": "name", "Values": [_UBUNTU_IMAGES]}]
        )["Images"]
        if not images:
            images = ec2.describe_images(
                Owners=[_UBUNTU_OWNER],
                Filters=[{"Name": "name", "Values": ["ubuntu/images/*amd64-server-*"]}],
            )["Images"]
        if not images:
            raise CredentialsError("no Ubuntu image is visible to this account here", "NoDefaultImage")
        return str(max(images, key=lambda i: i.get("CreationDate", ""))["ImageId"])

    def _key_pair(self, ec2: Any) -> str:
        """Import the deployment's public key once per region, under a name derived from the key itself,
        so every worker names the same key pair."""
        from botocore.exceptions import ClientError

        key = public_key()
        name = key_pair_name()
        found = ec2.describe_key_pairs(Filters=[{"Name": "key-name", "Values": [name]}])["KeyPairs"]
        if not found:
            try:
                ec2.import_key_pair(KeyName=name, PublicKeyMaterial=key.encode())
            except ClientError as exc:
                # Another worker imported it between our look and our import: the same key, so fine.
                if exc.response.get("Error", {}).get("Code") != "InvalidKeyPair.Duplicate":
                    raise
        return name

    def _security_group(self, ec2: Any, cluster_name: str, ports: list[str]) -> str:
        """The cluster's security group with SSH and the task's ports open (created once)."""
        from botocore.exceptions import ClientError

        name = f"skyhop-{cluster_name}"
        found = ec2.describe_security_groups(Filters=[{"Name": "group-name", "Values": [name]}])[
            "SecurityGroups"
        ]
        if found:
            group_id = str(found[0]["GroupId"])
        else:
            group_id = str(
                ec2.create_security_group(GroupName=name, Description=f"skyhop cluster {cluster_name}")[
                    "GroupId"
                ]
            )
        permissions = []
        for port in ["22", *ports]:
            low, _, high = port.partition("-")
            permissions.append(
                {
                    "IpProtocol": "tcp",
                    "FromPort": int(low),
                    "ToPort": int(high or low),
                    "IpRanges": [{"CidrIp": "0.0.0.0/0"}],
                }
            )
        for permission in permissions:
            try:
                ec2.authorize_security_group_ingress(GroupId=group_id, IpPermissions=[permission])
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") != "InvalidPermission.Duplicate":
                    raise
        return group_id

    async def open_ports(self, handle: ClusterHandle, ports: list[str]) -> None:
        await self._call(
            lambda session: self._security_group(
                _ec2(session, handle.offering.region), handle.cluster_name, ports
            )
        )

    async def terminate_instances(self, region: str | None, instances: list[Instance]) -> None:
        if instances:
            ids = [i.instance_id for i in instances]
            await self._call(lambda session: _ec2(session, region).terminate_instances(InstanceIds=ids))

    async def terminate(self, handle: ClusterHandle) -> None:
        """Terminate the nodes, then remove the cluster's security group once nothing uses it."""
        await super().terminate(handle)
        region = handle.offering.region

        def remove_group(session: Any) -> None:
            ec2 = _ec2(session, region)
            name = f"skyhop-{handle.cluster_name}"
            groups = ec2.describe_security_groups(Filters=[{"Name": "group-name", "Values": [name]}])[
                "SecurityGroups"
            ]
            if not groups:
                return
            users = ec2.describe_instances(
                Filters=[
                    {"Name": "instance.group-id", "Values": [groups[0]["GroupId"]]},
                    {
                        "Name": "instance-state-name",
                        "Values": ["pending", "running", "stopping", "stopped", "shutting-down"],
                    },
                ]
            )["Reservations"]
            if users:
                ec2.get_waiter("instance_terminated").wait(
                    InstanceIds=[i["InstanceId"] for r in users for i in r["Instances"]],
                    WaiterConfig={"Delay": 5, "MaxAttempts": 60},
                )
            ec2.delete_security_group(GroupId=groups[0]["GroupId"])

        await self._call(remove_group)

    async def stop_instances(self, region: str | None, instances: list[Instance]) -> None:
        ids = [i.instance_id for i in instances]
        await self._call(lambda session: _ec2(session, region).stop_instances(InstanceIds=ids))

    async def start_instances(self, region: str | None, instances: list[Instance]) -> None:
        ids = [i.instance_id for i in instances]
        await self._call(lambda session: _ec2(session, region).start_instances(InstanceIds=ids))

    def node(self, request: ProvisionRequest, instance: Instance) -> NodeHandle:
        return ssh_node(request.cluster_name, instance, SSH_USER)

    def runtime(self, node: NodeHandle) -> NodeRuntime:
        return ssh_runtime(node, SSH_USER)


_TIER_VOLUMES: dict[DiskTier, dict[str, Any]] = {
    DiskTier.LOW: {"VolumeType": "standard"},
    DiskTier.MEDIUM: {"VolumeType": "gp3", "Iops": 3500, "Throughput": 3500 // 16},
    DiskTier.HIGH: {"VolumeType": "gp3", "Iops": 7000, "Throughput": 7000 // 16},
    DiskTier.ULTRA: {"VolumeType": "io2", "Iops": 20000},
}
"""SkyPilot's EBS volume per disk tier (``best`` is ``ultra``)."""


def ebs_volume(request: ProvisionRequest) -> dict[str, Any]:
    """The boot volume's EBS settings: size, and type and IOPS by disk tier (default gp3)."""
    tier = DiskTier.ULTRA if request.disk_tier == DiskTier.BEST else request.disk_tier
    volume: dict[str, Any] = dict(_TIER_VOLUMES[tier]) if tier else {"VolumeType": "gp3"}
    if request.disk_size:
        volume["VolumeSize"] = request.disk_size
    return volume
