"""A container runtime beside each pod's node container: ``config.kubernetes.enable_docker``, as SkyPilot's.

``all``: Docker-in-Docker. The ``docker`` image's own dind entrypoint runs ``dockerd`` in a privileged
sidecar (the cluster must admit privileged pods). The node container reaches it through the daemon's
unix socket, in an emptyDir both containers mount (``DOCKER_HOST``), never over the pod network: the
image's TCP port stays TLS with client certificates only the sidecar holds, so no other pod of the
cluster gets a daemon that is root on the machine.

``build``: rootless BuildKit, for image builds and pushes only, with no privilege asked for: uid 1000,
unconfined seccomp and AppArmor (rootlesskit makes user namespaces), and no nested process sandbox
(an unprivileged container cannot mount the ``/proc`` one needs). The node reaches it on a unix socket
in a shared emptyDir too (``BUILDKIT_HOST``: ``buildctl`` reads it; ``docker buildx create --driver
remote "$BUILDKIT_HOST" --use`` makes it buildx's builder).

The daemon keeps images and build cache in an emptyDir, gone with the pod, or with ``cache_volume``
in that volume (its PVC), each pod in its own folder of it (``subPath``: the pod's name, which a
relaunched cluster reuses), so one volume serves many clusters.

The node container's image needs the ``docker`` CLI (and its buildx plugin for ``build``): skyhop
does not install it, as a package install differs by distribution, needs root and network, and would
run at every launch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from skyhop.providers.overrides import DockerInPod, DockerMode

__all__ = ["BUILDKIT_IMAGE", "DIND_IMAGE", "with_docker"]

DIND_IMAGE = "docker:28-dind"
BUILDKIT_IMAGE = "moby/buildkit:v0.18.2-rootless"
_SOCKET_VOLUME = "docker-socket"
_DATA_VOLUME = "docker-data"
_NODE_SOCKETS = "/var/run/skyhop-docker"
"""Where the node container sees the sidecar's socket folder."""


@dataclass(frozen=True)
class _Daemon:
    """One mode's sidecar: what it runs and where its socket and data are inside it."""

    container: str
    image: str
    args: tuple[str, ...]
    socket_dir: str
    socket: str
    data_dir: str
    address_env: str
    """The variable the node container's clients read the daemon's address from."""
    security: Mapping[str, Any]


_DAEMONS = {
    DockerMode.ALL: _Daemon(
        container="docker",
        image=DIND_IMAGE,
        args=(),  # the image's entrypoint listens on /var/run/docker.sock (and TLS on 2376)
        socket_dir="/var/run",
        socket="docker.sock",
        data_dir="/var/lib/docker",
        address_env="DOCKER_HOST",
        security={"privileged": True},
    ),
    DockerMode.BUILD: _Daemon(
        container="buildkit",
        image=BUILDKIT_IMAGE,
        # Its socket outside /run, which rootlesskit may give the daemon a copy of.
        args=("--addr", "unix:///srv/buildkit/buildkitd.sock", "--oci-worker-no-process-sandbox"),
        socket_dir="/srv/buildkit",
        socket="buildkitd.sock",
        data_dir="/home/user/.local/share/buildkit",
        address_env="BUILDKIT_HOST",
        security={
            "runAsUser": 1000,
            "runAsGroup": 1000,
            "seccompProfile": {"type": "Unconfined"},
            "appArmorProfile": {"type": "Unconfined"},
        },
    ),
}


def with_docker(manifest: Mapping[str, Any], setting: DockerInPod) -> dict[str, Any]:
    """``manifest`` (a pod of skyhop's, its first container the node's) with ``setting``'s daemon
    beside the node container, and the node container told where it answers. Added after the task's
    ``pod_config`` is merged, so the sidecar is never paired with one of the task's containers."""
    daemon = _DAEMONS[setting.mode]
    spec = dict(manifest["spec"])
    node, *others = spec["containers"]
    data = (
        {"persistentVolumeClaim": {"claimName": setting.cache_volume}}
        if setting.cache_volume
        else {"emptyDir": {}}
    )
    data_mount = {"name": _DATA_VOLUME, "mountPath": daemon.data_dir}
    if setting.cache_volume:
        data_mount["subPath"] = manifest["metadata"]["name"]
    sidecar: dict[str, Any] = {
        "name": daemon.container,
        "image": daemon.image,
        "securityContext": dict(daemon.security),
        "volumeMounts": [{"name": _SOCKET_VOLUME, "mountPath": daemon.socket_dir}, data_mount],
    }
    if daemon.args:
        sidecar["args"] = list(daemon.args)
    address = {"name": daemon.address_env, "value": f"unix://{_NODE_SOCKETS}/{daemon.socket}"}
    node = {
        **node,
        "env": [*node.get("env", []), address],
        "volumeMounts": [*node.get("volumeMounts", []), {"name": _SOCKET_VOLUME, "mountPath": _NODE_SOCKETS}],
    }
    spec["containers"] = [node, *others, sidecar]
    spec["volumes"] = [
        *spec.get("volumes", []),
        {"name": _SOCKET_VOLUME, "emptyDir": {}},
        {"name": _DATA_VOLUME, **data},
    ]
    return {**manifest, "spec": spec}
