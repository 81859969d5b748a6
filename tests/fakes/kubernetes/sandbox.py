"""A pod's machine: where its containers and exec sessions run as real processes.

Namespace mode (root, ``ip netns`` allowed): a network namespace with its own IP on the fake's
bridge (``tests/netns.py``), and a holder process (the pause container) in fresh mount and UTS
namespaces whose hostname is the pod's name and whose ``/root`` is the pod's own folder. Containers
and exec sessions enter the holder's namespaces with ``nsenter``, so they share the pod's network,
hostname, home and ``/etc/hosts`` (the pod's name at its IP, as the kubelet writes it), as containers
of one pod do; there is no cluster DNS (``/etc/resolv.conf`` is this machine's, unreachable).
Loopback mode: processes run on this machine's network (like ``hostNetwork: true`` pods, ``podIP``
is ``127.0.0.1``) with ``HOME`` the pod's folder.

Volume mounts (``mounts``: a path under ``/root`` and a folder of this machine) are bind mounts in the
holder's mount namespace, made after ``/root``; in loopback mode, symlinks in the pod's folder (so
``~/x`` reaches the volume, ``/root/x`` does not).

Either way every process carries ``SKYHOP_FAKE_POD=<uid>`` in its environment, so a pod's processes
are found (and killed) even when they detached from their parents.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from tests.netns import Bridge, Namespace, fake_nvidia_smi, namespace_pids

__all__ = ["Network", "Sandbox"]

MARKER = "SKYHOP_FAKE_POD"
NSENTER = shutil.which("nsenter") or "/usr/bin/nsenter"
IMAGE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class Sandbox:
    def __init__(
        self,
        uid: str,
        name: str,
        folder: Path,
        space: Namespace | None,
        gpus: list[str],
        index: int = 0,
        mounts: Sequence[tuple[str, Path]] = (),
    ) -> None:
        self.uid, self.name, self.folder, self.space, self.index = uid, name, folder, space, index
        self.mounts = list(mounts)
        self.host_home = folder / "root"
        self.host_home.mkdir(parents=True, exist_ok=True)
        self.bin = folder / "bin"
        if gpus:
            fake_nvidia_smi(self.bin, gpus)
        self.holder: subprocess.Popen[bytes] | None = None

    @property
    def ip(self) -> str:
        return self.space.address if self.space else "127.0.0.1"

    @property
    def home(self) -> str:
        """``HOME`` as the pod's processes see it."""
        return "/root" if self.space else str(self.host_home)

    def _link_mounts(self) -> None:
        for path, source in self.mounts:
            link = self.host_home / path.removeprefix("/root/")
            link.parent.mkdir(parents=True, exist_ok=True)
            if not link.is_symlink():
                link.symlink_to(source, target_is_directory=True)

    def start(self) -> None:
        if self.space is None:
            self._link_mounts()
            return
        hosts = self.folder / "hosts"
        hosts.write_text(
            f"127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n{self.ip}\t{self.name}\n"
        )
        binds = "".join(
            f"mkdir -p {shlex.quote(path)} && mount --bind {shlex.quote(str(source))} {shlex.quote(path)} && "
            for path, source in self.mounts
        )
        boot = (
            'hostname "$0" && mount --bind "$1" /root && mount --bind "$2" /etc/hosts && '
            f"{binds}echo ready && exec sleep infinity"
        )
        self.holder = subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                self.space.name,
                "unshare",
                "--mount",
                "--uts",
                "--propagation",
                "private",
                "sh",
                "-c",
                boot,
                self.name,
                str(self.host_home),
                str(hosts),
            ],
            stdout=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            env={"PATH": IMAGE_PATH, MARKER: self.uid},
            start_new_session=True,
        )
        assert self.holder.stdout is not None
        if self.holder.stdout.readline().strip() != b"ready":
            raise RuntimeError(f"pod {self.name}: its sandbox did not start")

    def environment(self, env: Mapping[str, str]) -> dict[str, str]:
        path = f"{self.bin}:{IMAGE_PATH}" if self.bin.exists() else IMAGE_PATH
        return {"PATH": path, "HOME": self.home, "HOSTNAME": self.name, **env, MARKER: self.uid}

    def spawn(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        workdir: str,
        stdin: int | IO[Any] | None,
        stdout: int | IO[Any] | None,
        stderr: int | IO[Any] | None,
    ) -> subprocess.Popen[bytes]:
        """``argv`` inside the pod, in its own process group, in ``workdir`` (created, as runtimes do)."""
        if self.holder is not None:
            enter = [NSENTER, "-t", str(self.holder.pid), "-n", "-m", "-u", "--"]
        else:
            enter = []
            workdir = workdir.replace("/root", self.home, 1) if workdir.startswith("/root") else workdir
        script = 'mkdir -p "$0" && cd "$0" && exec "$@"'
        return subprocess.Popen(
            [*enter, "/bin/sh", "-c", script, workdir, *argv],
            env=self.environment(env),
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
        )

    def pids(self) -> list[int]:
        """Every process of the pod: in its namespace, or marked with its uid."""
        found = set(namespace_pids(self.space.name)) if self.space else set()
        needle = f"{MARKER}={self.uid}".encode()
        for environ in Path("/proc").glob("[0-9]*/environ"):
            with contextlib.suppress(OSError):
                if needle in environ.read_bytes().split(b"\0"):
                    found.add(int(environ.parent.name))
        found.discard(os.getpid())
        return sorted(found)

    def kill(self) -> None:
        """Every process of the pod dies now (SIGKILL), the holder last."""
        for _ in range(3):
            pids = self.pids()
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        if self.holder is not None:
            self.holder.kill()
            self.holder.wait()


class Network:
    """Pods' addresses: one bridge for the fake cluster (namespace mode), or this machine's loopback."""

    def __init__(self, folder: Path, loopback: bool) -> None:
        self.folder, self.loopback = folder, loopback
        self.bridge: Bridge | None = None
        self._used: set[int] = set()
        if not loopback:
            self.bridge = Bridge(prefix="10.244", kind="k8")
            self.bridge.create()

    @property
    def node_ip(self) -> str:
        """The nodes' ``InternalIP``: the bridge's address (every fake node is this machine)."""
        return self.bridge.gateway if self.bridge else "127.0.0.1"

    def sandbox(
        self, uid: str, name: str, gpus: list[str], mounts: Sequence[tuple[str, Path]] = ()
    ) -> Sandbox:
        space, index = None, 0
        if self.bridge is not None:
            index = min(set(range(1, 245)) - self._used)
            self._used.add(index)
            space = self.bridge.add(index, f"k8s-{self.bridge.tag}-{index}")
        sandbox = Sandbox(uid, name, self.folder / uid, space, gpus, index, mounts)
        try:
            sandbox.start()
        except BaseException:
            self.remove(sandbox)
            raise
        return sandbox

    def remove(self, sandbox: Sandbox) -> None:
        sandbox.kill()
        if self.bridge is not None and sandbox.space is not None:
            self.bridge.remove(sandbox.space)
            self._used.discard(sandbox.index)

    def close(self) -> None:
        if self.bridge is not None:
            self.bridge.delete()
