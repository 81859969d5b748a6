"""Driving a service through the CLI in tests: its status, a client sending requests throughout."""

from __future__ import annotations

import http.client
import json
import threading
from pathlib import Path
from urllib.parse import urlsplit

from tests.conftest import skyhop

__all__ = ["Client", "alive", "check_replaced", "get", "ready_replicas", "replaced", "status"]


class Client:
    """Sends GET / through the load balancer, one after another, until stopped; keeps every answer."""

    def __init__(self, endpoint: str, headers: dict[str, str] | None = None) -> None:
        self.endpoint = endpoint
        self.headers = headers or {}
        self.answers: list[str] = []
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._send)

    def _send(self) -> None:
        while not self._stop.is_set():
            try:
                status, body = get(self.endpoint, self.headers)
            except OSError as exc:
                self.failures.append(repr(exc))
                continue
            if status != 200:
                self.failures.append(f"status {status}")
            self.answers.append(body)

    def __enter__(self) -> Client:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def status(env: dict[str, str], name: str) -> dict[str, object]:
    result = skyhop("serve", "status", name, "--json", env=env)
    assert result.returncode == 0, result.stderr
    (item,) = json.loads(result.stdout)["items"]
    assert isinstance(item, dict)
    return item


def ready_replicas(item: dict[str, object]) -> list[dict[str, object]]:
    replicas = item["replicas"]
    assert isinstance(replicas, list)
    return [r for r in replicas if r["status"] == "READY"]


def get(endpoint: str, headers: dict[str, str] | None = None, timeout: float = 30) -> tuple[int, str]:
    parts = urlsplit(endpoint)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=timeout)
    try:
        connection.request("GET", parts.path or "/", headers=headers or {})
        response = connection.getresponse()
        return response.status, response.read().decode().strip()
    finally:
        connection.close()


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def replaced(env: dict[str, str], name: str, victim: object) -> bool:
    """Whether two replicas are READY again, replica ``victim`` not among them."""
    ready = ready_replicas(status(env, name))
    return len(ready) == 2 and victim not in {r["replica_id"] for r in ready}


def check_replaced(
    env: dict[str, str], name: str, client: Client, survivor: object, answers: set[str]
) -> list[dict[str, object]]:
    """After one replica was killed and replaced: no request failed, every answer was one of
    ``answers``, the survivor serves on; returns the READY replicas."""
    assert client.failures == [], client.failures[:5]
    assert client.answers and set(client.answers) == answers
    after = status(env, name)
    assert after["replaced"] == 1
    ready = ready_replicas(after)
    assert survivor in {r["replica_id"] for r in ready}
    return ready
