"""Sim nodes with addresses of their own: one network namespace per instance, cabled to a bridge.

Opt-in through the fault plan's ``network: {bridge: NAME}``: the bridge must exist in this
machine's namespace with an IPv4 address on a /24 (its gateway, ``a.b.c.1`` by convention). Each
instance then gets a namespace ``skyhop-<cloud tag>-<instance id>`` at ``a.b.c.H`` and a veth pair
to the bridge; its node's processes run inside it (``ip netns exec``), so every node can listen on
the same port, and the worker's machine reaches it through the bridge as it would another machine.
Needs root and iproute2. The test helpers (``tests/netns.py``) cable their machines the same way.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import subprocess

__all__ = ["bridge_subnet", "cable", "kill_all", "namespace_pids", "unplug", "veth_names"]


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def bridge_subnet(bridge: str) -> tuple[str, str]:
    """(``a.b.c``, the bridge's own address) of ``bridge``'s IPv4 /24; ValueError if it has none."""
    out = subprocess.run(["ip", "-4", "-o", "addr", "show", "dev", bridge], capture_output=True, text=True)
    for line in out.stdout.splitlines():
        fields = line.split()
        cidr = fields[fields.index("inet") + 1] if "inet" in fields else ""
        address, _, length = cidr.partition("/")
        if length == "24":
            return address.rsplit(".", 1)[0], address
    raise ValueError(f"bridge {bridge!r} does not exist or has no IPv4 /24 address")


def veth_names(netns: str) -> tuple[str, str]:
    """The root-side and namespace-side ends of ``netns``'s cable (under Linux's 15 characters)."""
    tag = hashlib.sha1(netns.encode()).hexdigest()[:10]
    return f"sv{tag}", f"sp{tag}"


def cable(netns: str, bridge: str, address: str, gateway: str, veth: str, peer: str) -> None:
    """Make namespace ``netns`` at ``address``/24, cabled to ``bridge``, routed through ``gateway``."""
    _ip("netns", "add", netns)
    _ip("link", "add", veth, "type", "veth", "peer", "name", peer)
    _ip("link", "set", peer, "netns", netns)
    _ip("link", "set", veth, "master", bridge, "up")
    inside = [
        ("addr", "add", f"{address}/24", "dev", peer),
        ("link", "set", peer, "up"),
        ("link", "set", "lo", "up"),
        ("route", "add", "default", "via", gateway),
    ]
    for args in inside:
        _ip("netns", "exec", netns, "ip", *args)


def namespace_pids(netns: str) -> list[int]:
    """Every process in the namespace, including daemons that left their parent's session."""
    out = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True)
    return [int(pid) for pid in out.stdout.split()]


def kill_all(netns: str) -> None:
    """SIGKILL every process in the namespace (a machine that loses power)."""
    for pid in namespace_pids(netns):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def unplug(netns: str, veth: str) -> None:
    """Kill what runs in the namespace, then delete it and its cable; nothing to do when gone."""
    kill_all(netns)
    subprocess.run(["ip", "netns", "del", netns], capture_output=True)
    subprocess.run(["ip", "link", "del", veth], capture_output=True)
