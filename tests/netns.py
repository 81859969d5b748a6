"""Test machines with their own IP: network namespaces joined to one bridge by veth pairs.

The sshd test hosts (``tests/ssh/hosts.py``) and the fake Kubernetes' pods
(``tests/fakes/kubernetes``) both need processes that look like separate machines on one subnet,
so a multi-node job sees real, distinct addresses. Namespaces need root; ``can_netns`` says whether
this machine allows them, and callers fall back to loopback when it does not.
"""

from __future__ import annotations

import fcntl
import os
import random
import shutil
import subprocess
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

from skyhop.providers.sim.network import cable, namespace_pids

__all__ = ["Bridge", "Namespace", "can_netns", "fake_nvidia_smi", "ip", "namespace_pids"]


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


def can_netns() -> bool:
    if os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("unshare") is None:
        return False
    probe = f"skyhop-probe-{uuid.uuid4().hex[:6]}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True).returncode == 0
    if made:
        subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return made


def fake_nvidia_smi(folder: Path, gpus: list[str]) -> Path:
    """A ``nvidia-smi`` in ``folder`` that lists ``gpus`` one a line (as ``--query-gpu=name`` does)."""
    folder.mkdir(parents=True, exist_ok=True)
    smi = folder / "nvidia-smi"
    smi.write_text("#!/bin/sh\nprintf '%s\\n' " + " ".join(f"'{g}'" for g in gpus) + "\n")
    smi.chmod(0o755)
    return smi


@dataclass(frozen=True)
class Namespace:
    """One machine's network: its namespace, its address, and the root-side end of its cable."""

    name: str
    address: str
    veth: str
    """``ip link set <veth> down`` unplugs the machine."""


class Bridge:
    """A bridge on a free private /24 (``{prefix}.N.0/24``, the bridge is ``.1``) in the root namespace.

    Interface names are ``{kind}b/v/p{tag}{index}``: under Linux's 15 characters, unique per bridge.
    """

    def __init__(self, prefix: str = "10.200", kind: str = "sh") -> None:
        self.prefix, self.kind = prefix, kind
        self.tag = uuid.uuid4().hex[:6]
        self.name = f"{kind}b{self.tag}"
        self.subnet = ""
        self.namespaces: list[Namespace] = []

    @property
    def gateway(self) -> str:
        return f"{self.subnet}.1"

    def create(self) -> None:
        """Claim a /24 nobody uses: read, pick and assign under one machine-wide lock.

        Test processes running at once (pytest-xdist workers, other sessions) would otherwise read
        the same free subnets and may pick the same one: Linux lets two bridges hold one address, so
        nothing fails until traffic routes to the wrong bridge.
        """
        with open(Path(tempfile.gettempdir()) / "skyhop-test-subnets.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or the process dies
            used = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True).stdout
            free = [n for n in range(1, 255) if f"{self.prefix}.{n}." not in used]
            self.subnet = f"{self.prefix}.{random.choice(free)}"
            ip("link", "add", self.name, "type", "bridge")
            ip("addr", "add", f"{self.gateway}/24", "dev", self.name)
        ip("link", "set", self.name, "up")

    def add(self, index: int, netns: str) -> Namespace:
        """Namespace ``netns`` at ``.{10 + index}``, cabled to the bridge, routed through its gateway."""
        veth, peer = f"{self.kind}v{self.tag}{index}", f"{self.kind}p{self.tag}{index}"
        space = Namespace(netns, f"{self.subnet}.{10 + index}", veth)
        self.namespaces.append(space)
        cable(netns, self.name, space.address, self.gateway, veth, peer)
        return space

    def remove(self, space: Namespace) -> None:
        """Delete the namespace and its cable (its processes must be gone first)."""
        subprocess.run(["ip", "netns", "del", space.name], capture_output=True)
        subprocess.run(["ip", "link", "del", space.veth], capture_output=True)
        if space in self.namespaces:
            self.namespaces.remove(space)

    def delete(self) -> None:
        for space in list(self.namespaces):
            self.remove(space)
        if self.subnet:
            subprocess.run(["ip", "link", "del", self.name], capture_output=True)
