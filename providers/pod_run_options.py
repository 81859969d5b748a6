"""``config.docker.run_options`` on Kubernetes, where each node is a pod that already is the container.

SkyPilot's examples give options such as ``--ipc=host --shm-size=16g --cap-add=SYS_PTRACE`` for the
task's ``docker run``. A pod is started by the cluster, not by ``docker run``, so each option that has a
pod equivalent becomes that part of the pod (merged like ``config.kubernetes.pod_config``), and an
option without one leaves Kubernetes out of the plan, naming it: never dropped silently.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

__all__ = ["PodOptions", "pod_options"]

_SIZE = re.compile(r"^(\d+(?:\.\d+)?)([bkmgt]?)b?$", re.IGNORECASE)
_SIZE_SUFFIX = {"": "", "b": "", "k": "Ki", "m": "Mi", "g": "Gi", "t": "Ti"}


class PodOptions:
    """The pod config run options amount to, or the first one that has no pod equivalent."""

    def __init__(self) -> None:
        self.pod_spec: dict[str, Any] = {}
        self.container: dict[str, Any] = {}
        self.unsupported: str | None = None

    @property
    def pod_config(self) -> dict[str, Any]:
        """A partial Pod: ``spec`` fields and the node container's (the first container)."""
        spec = dict(self.pod_spec)
        if self.container:
            spec["containers"] = [self.container]
        return {"spec": spec} if spec else {}

    def _shm(self, size: str) -> None:
        match = _SIZE.match(size)
        if match is None:
            raise ValueError(size)
        quantity = f"{match.group(1)}{_SIZE_SUFFIX[match.group(2).lower()]}"
        volume = {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": quantity}}
        self.pod_spec.setdefault("volumes", []).append(volume)
        self.container.setdefault("volumeMounts", []).append({"name": "dshm", "mountPath": "/dev/shm"})

    def _capability(self, which: str, name: str) -> None:
        security = self.container.setdefault("securityContext", {})
        security.setdefault("capabilities", {}).setdefault(which, []).append(name.upper())

    def _env(self, assignment: str) -> None:
        name, equals, value = assignment.partition("=")
        if not equals:
            raise ValueError(assignment)  # ``-e NAME`` copies the caller's variable: none here
        self.container.setdefault("env", []).append({"name": name, "value": value})

    def _namespace(self, field: str, mode: str) -> None:
        if mode != "host":
            raise ValueError(mode)
        self.pod_spec[field] = True

    def privileged(self) -> None:
        self.container.setdefault("securityContext", {})["privileged"] = True

    def _gpus(self, _: str) -> None:
        """The pod's GPUs are its ``nvidia.com/gpu`` request: the node's container sees them."""

    def valued(self) -> dict[str, Callable[[str], None]]:
        """The options that take a value (``--ipc=host`` or ``--ipc host``), by name."""
        return {
            "--shm-size": self._shm,
            "--cap-add": lambda value: self._capability("add", value),
            "--cap-drop": lambda value: self._capability("drop", value),
            "-e": self._env,
            "--env": self._env,
            "--ipc": lambda value: self._namespace("hostIPC", value),
            "--pid": lambda value: self._namespace("hostPID", value),
            "--net": lambda value: self._namespace("hostNetwork", value),
            "--network": lambda value: self._namespace("hostNetwork", value),
            "--gpus": self._gpus,
        }


def pod_options(arguments: list[str]) -> PodOptions:
    """What ``docker run`` ``arguments`` (already split) amount to on a pod."""
    found = PodOptions()
    flags = {"--privileged": found.privileged}
    handlers = found.valued()
    items = iter(arguments)
    for item in items:
        if item in flags:
            flags[item]()
            continue
        name, equals, value = item.partition("=")
        handler = handlers.get(name)
        if handler is None:
            found.unsupported = item
            return found
        if not equals:
            value = next(items, "")
        try:
            handler(value)
        except ValueError:
            found.unsupported = f"{name} {value}".strip()
            return found
    return found
