"""Starting a load balancer process and reading the ports it announces.

The controller (and the tests and the benchmark) start one with ``LoadBalancerProcess.start`` and
stop it by pid; the process's stderr goes to a log file of the caller's choosing.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from skyhop.contract.serve import LoadBalancerReady, LoadBalancingPolicy

__all__ = ["LoadBalancerExited", "LoadBalancerProcess", "stop_process"]

_READY_TIMEOUT_S = 30.0


class LoadBalancerExited(Exception):
    """The load balancer ended (or said nothing) before announcing its ports; its log says why."""


@dataclass
class LoadBalancerProcess:
    proc: subprocess.Popen[bytes]
    ready: LoadBalancerReady

    @property
    def port(self) -> int:
        return self.ready.port

    @property
    def control_port(self) -> int:
        return self.ready.control_port

    @classmethod
    def start(
        cls,
        token_file: Path,
        log: Path,
        *,
        policy: LoadBalancingPolicy = LoadBalancingPolicy.LEAST_LOAD,
        port: int = 0,
        extra: list[str] | None = None,
        detached: bool = False,
    ) -> LoadBalancerProcess:
        """Start one and wait until it listens (``extra``: more of its command-line options).

        ``detached``: in a session of its own, so it outlives its starter (a service's controller
        starts it from a worker, and stops it by pid at ``serve down``)."""
        argv = [sys.executable, "-m", "skyhop.serve.load_balancer", "--token-file", str(token_file)]
        argv += ["--port", str(port), "--policy", policy.value, *(extra or [])]
        with log.open("ab") as err:
            proc = subprocess.Popen(
                argv, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL, start_new_session=detached
            )
        assert proc.stdout is not None
        deadline = time.monotonic() + _READY_TIMEOUT_S
        line = b""
        while not line.endswith(b"\n") and (left := deadline - time.monotonic()) > 0:
            if select.select([proc.stdout], [], [], left)[0]:
                chunk = os.read(proc.stdout.fileno(), 4096)
                if not chunk:
                    break
                line += chunk
        if not line.endswith(b"\n"):
            stop_process(proc)
            tail = log.read_text(errors="replace").strip().splitlines()[-1:] or ["no output"]
            raise LoadBalancerExited(
                f"load balancer did not start (exit {proc.returncode}): {tail[0]} (see {log})"
            )
        return cls(proc, LoadBalancerReady.model_validate_json(line))

    def stop(self) -> None:
        stop_process(self.proc)

    def __enter__(self) -> LoadBalancerProcess:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.stop()


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after 10 s: the load balancer closes its ports on SIGTERM."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()
