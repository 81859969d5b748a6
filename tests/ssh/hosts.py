"""Real OpenSSH test hosts: one ``sshd`` per node, in a network namespace where the machine allows it.

Namespace mode: a bridge on a private test subnet (10.200.N.0/24) in the root namespace, one
namespace per node joined to it by a veth pair, and in each an ``sshd`` started under
``unshare --mount --uts`` with its own hostname and a private tmpfs over root's home, so every
node has its own home folder like a real machine. Loopback mode (no namespaces allowed): several
``sshd`` on 127.0.0.1 ports sharing this machine's files.

Every node has its own ed25519 host key and accepts one generated test key. Everything is removed
at teardown, processes by pid.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.helpers import descendants, free_port, wait_for
from tests.netns import Bridge, can_netns, fake_nvidia_smi, namespace_pids

__all__ = ["SSHHost", "SSHHosts"]

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


@dataclass
class SSHHost:
    """One test node."""

    name: str
    address: str
    port: int
    folder: Path
    netns: str | None = None
    veth: str | None = None
    """The root-namespace end of the node's veth pair (``ip link set <veth> down`` cuts it off)."""
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def pids(self) -> list[int]:
        """Every process running on the node (loopback mode: sshd and its sessions; detached jobs escape)."""
        if self.netns is None:
            alive = self.proc is not None and self.proc.poll() is None
            return [self.proc.pid, *descendants(self.proc.pid)] if alive and self.proc else []
        return namespace_pids(self.netns)

    def kill(self) -> None:
        """The node dies: sshd, its sessions and (namespace mode) everything it started."""
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait()

    def link(self, up: bool) -> None:
        """Plug or unplug the node's network cable."""
        assert self.veth is not None, "only namespace hosts have a link"
        subprocess.run(["ip", "link", "set", self.veth, "up" if up else "down"], check=True)


class SSHHosts:
    """``count`` sshd hosts that accept ``key`` as ``login`` (root unless told)."""

    def __init__(
        self,
        folder: Path,
        count: int,
        *,
        loopback: bool = False,
        gpus: dict[int, list[str]] | None = None,
        without_rsync: frozenset[int] = frozenset(),
        login: str = "root",
    ) -> None:
        self.folder = folder
        self.count = count
        self.gpus = gpus or {}
        """Namespace mode: node index -> GPU names its (fake) ``nvidia-smi`` reports."""
        self.without_rsync = without_rsync
        """Namespace mode: nodes where ``rsync`` is not installed."""
        self.login = login
        """The user the key logs in as. Besides root (namespace mode only): another name for root whose
        home is ``/home/<login>``, as a cloud image's default user (``ubuntu``) with root's rights."""
        self.key = folder / "id_test"
        self.hosts: list[SSHHost] = []
        self.bridge: Bridge | None = None
        self.started_at = time.time()
        self.tag = uuid.uuid4().hex[:6]
        """Unique to this set of hosts, for names tests give what they make on it (pools)."""
        self.loopback = loopback or os.environ.get("SKYHOP_TEST_SSH_LOOPBACK") == "1" or not can_netns()
        assert login == "root" or not self.loopback, "a login other than root needs namespace hosts"

    def start(self) -> None:
        self.started_at = time.time()
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "skyhop-test", "-f", str(self.key)],
            check=True,
        )
        (self.folder / "authorized_keys").write_text(Path(f"{self.key}.pub").read_text())
        Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege separation folder
        if not self.loopback:
            self.bridge = Bridge()
            self.bridge.create()
        for index in range(1, self.count + 1):
            folder = self.folder / f"node{index}"
            folder.mkdir()
            if self.bridge is None:
                host = SSHHost(f"node{index}", "127.0.0.1", free_port(), folder)
            else:
                host = self._make_namespace(index, self.bridge, folder)
            self.hosts.append(host)
            self._start_sshd(host)
        for host in self.hosts:
            wait_for(lambda h=host: _answers(h.address, h.port), 20, f"sshd on {host.address}:{host.port}")

    def _make_namespace(self, index: int, bridge: Bridge, folder: Path) -> SSHHost:
        space = bridge.add(index, f"skyhop-{bridge.tag}-n{index}")
        return SSHHost(f"node{index}", space.address, 22, folder, netns=space.name, veth=space.veth)

    def _start_sshd(self, host: SSHHost) -> None:
        host_key = host.folder / "ssh_host_ed25519_key"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(host_key)], check=True)
        config = host.folder / "sshd_config"
        config.write_text(
            f"Port {host.port}\nListenAddress {host.address}\nHostKey {host_key}\n"
            f"PidFile {host.folder / 'sshd.pid'}\nAuthorizedKeysFile {self.folder / 'authorized_keys'}\n"
            "PermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
            "UsePAM no\nStrictModes no\nSubsystem sftp internal-sftp\nMaxStartups 100\nMaxSessions 100\n"
            "LogLevel ERROR\n"
        )
        sshd = [SSHD, "-D", "-e", "-f", str(config)]
        if host.netns is not None:
            # Its own hostname, and an empty home of its own (no shared ~/.bashrc, no shared files).
            boot = f"hostname {host.name} && mount -t tmpfs tmpfs /root"
            index = int(host.name.removeprefix("node"))
            if index in self.gpus:
                sbin = host.folder / "sbin"
                fake_nvidia_smi(sbin, self.gpus[index])
                boot += f" && mount --bind {sbin} /usr/local/sbin"
            if index in self.without_rsync:
                boot += " && mount --bind /dev/null /usr/bin/rsync"
            if self.login != "root":
                passwd = host.folder / "passwd"
                entry = f"{self.login}:x:0:0::/home/{self.login}:/bin/bash\n"
                passwd.write_text(Path("/etc/passwd").read_text() + entry)
                boot += f" && mount -t tmpfs tmpfs /home && mkdir /home/{self.login}"
                boot += f" && mount --bind {passwd} /etc/passwd"
            boot += f" && exec {' '.join(sshd)}"
            argv = ["ip", "netns", "exec", host.netns, "unshare", "--mount", "--uts", "--propagation",
                    "private", "sh", "-c", boot]  # fmt: skip
        else:
            argv = sshd
        log = open(host.folder / "sshd.log", "ab")  # noqa: SIM115 - lives as long as sshd
        host.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    @contextlib.contextmanager
    def running(self) -> Iterator[SSHHosts]:
        """The hosts, up for the block and stopped after it (also when starting them fails part-way)."""
        try:
            self.start()
            yield self
        finally:
            self.stop()

    def authorise(self, public_key: str) -> None:
        """Every node accepts ``public_key`` too (sshd reads the file at each login)."""
        with (self.folder / "authorized_keys").open("a") as keys:
            keys.write(public_key.strip() + "\n")

    def stop(self) -> None:
        """Kill every node's processes, then remove namespaces, veths and the bridge."""
        for host in self.hosts:
            host.kill()
            if host.proc is not None and host.proc.poll() is None:
                host.proc.kill()
                host.proc.wait()
        if self.bridge is not None:
            self.bridge.delete()
        if self.loopback:
            self._remove_leftover_nodes()

    def _remove_leftover_nodes(self) -> None:
        """Loopback nodes share this machine: stop jobs a lost node left and remove its folders."""
        for folder in (Path(pwd.getpwuid(os.getuid()).pw_dir) / ".skyhop-node").glob("*"):
            if folder.stat().st_mtime < self.started_at:
                continue
            for state_file in folder.glob("jobs/*/state.json"):
                with contextlib.suppress(OSError, ValueError, KeyError, ProcessLookupError):
                    state = json.loads(state_file.read_text())
                    os.killpg(state["pid"], signal.SIGKILL)
                    os.kill(state["runner_pid"], signal.SIGKILL)
            shutil.rmtree(folder, ignore_errors=True)


def _answers(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=1) as sock:
            sock.settimeout(2)
            return sock.recv(4).startswith(b"SSH-")
    except OSError:
        time.sleep(0.05)
        return False
