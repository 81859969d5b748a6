"""Real processes for the load balancer's tests: replicas (``replica_app``) and load balancers, on
free loopback ports, each stopped by pid."""

from __future__ import annotations

import http.client
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from skyhop.contract.serve import LoadBalancingPolicy, ReplicaEndpoint
from skyhop.serve.control import create_token_file
from skyhop.serve.control_client import LoadBalancerControl
from skyhop.serve.launch import LoadBalancerProcess, stop_process
from tests.conftest import run

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Replica:
    replica_id: int
    port: int
    proc: subprocess.Popen[bytes]

    @property
    def endpoint(self) -> ReplicaEndpoint:
        return ReplicaEndpoint(replica_id=self.replica_id, host="127.0.0.1", port=self.port)

    def count(self) -> int:
        """Requests it has seen (asked directly, not through the load balancer)."""
        return int(get(self.port, "/count")[1])


@dataclass
class LoadBalancer:
    process: LoadBalancerProcess
    control: LoadBalancerControl

    @property
    def port(self) -> int:
        return self.process.port

    def push(self, *replicas: Replica | ReplicaEndpoint) -> None:
        run(self.control.push([r.endpoint if isinstance(r, Replica) else r for r in replicas]))

    def in_flight(self) -> list[int]:
        return [replica.in_flight for replica in run(self.control.stats()).replicas]


def get(
    port: int, path: str, method: str = "GET", body: bytes | None = None, timeout: float = 30
) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request(method, path, body=body)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


@pytest.fixture
def start_replica() -> Iterator[Callable[..., Replica]]:
    started: list[subprocess.Popen[bytes]] = []

    def start(replica_id: int, *flags: str) -> Replica:
        argv = [sys.executable, "-m", "tests.serve.replica_app", "--id", str(replica_id), *flags]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, cwd=REPO)
        started.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        assert line.startswith("ready "), f"replica {replica_id} did not start: {line!r}"
        return Replica(replica_id, int(line.split()[1]), proc)

    yield start
    for proc in started:
        stop_process(proc)


@pytest.fixture
def start_lb(tmp_path: Path) -> Iterator[Callable[..., LoadBalancer]]:
    started: list[LoadBalancerProcess] = []

    def start(policy: LoadBalancingPolicy = LoadBalancingPolicy.LEAST_LOAD, *extra: str) -> LoadBalancer:
        token_file = tmp_path / f"lb{len(started)}.token"
        token = create_token_file(token_file)
        process = LoadBalancerProcess.start(
            token_file, tmp_path / f"lb{len(started)}.log", policy=policy, extra=list(extra)
        )
        started.append(process)
        return LoadBalancer(process, LoadBalancerControl(process.control_port, token))

    yield start
    for process in started:
        process.stop()
