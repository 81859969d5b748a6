"""Activities of a service's controller: its load balancer process, and its replicas' probes.

The load balancer runs on the host of the worker that started it, recorded in
``~/.skyhop/serve/<service>/load_balancer.json``: ``sync_load_balancer`` starts one only when that
record names no live one (so a retried or repeated call never starts a second), on the port it had
before (the endpoint stays put across a restart), and pushes the READY set to it. It holds a request
that comes while no replica is READY for ``SKYHOP_SERVE_HOLD_TIMEOUT`` seconds (the worker's
environment; default ``ProxyTimeouts.hold``), and ``watch_for_held`` tells a service that runs no
replica the moment one is held, so the controller scales up at once rather than at its next tick.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import time
import urllib.error
import urllib.request
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel
from temporalio import activity

from skyhop.contract.serve import LoadBalancerInfo, LoadBalancerStats, LoadBalancingPolicy, ReplicaEndpoint
from skyhop.providers.base import ClusterHandle
from skyhop.providers.home import skyhop_home
from skyhop.providers.registry import get_provider
from skyhop.providers.runtime.jobs import NodeJobStatus
from skyhop.serve.control import create_token_file, read_token_file
from skyhop.serve.control_client import ControlError, LoadBalancerControl
from skyhop.serve.launch import LoadBalancerExited, LoadBalancerProcess
from skyhop.serve.proxy import ProxyTimeouts
from skyhop.spec.service import ReadinessProbe

__all__ = [
    "HOLD_TIMEOUT_ENV",
    "WATCH_HELD_S",
    "HeldWatch",
    "LoadBalancerSync",
    "ProbeAnswer",
    "ReplicaPortInput",
    "ReplicaProbe",
    "choose_replica_port",
    "load_balancer_folder",
    "load_balancer_stats",
    "probe_replica",
    "stop_load_balancer",
    "sync_load_balancer",
    "watch_for_held",
]

_STOP_GRACE_S = 10.0
HOLD_TIMEOUT_ENV = "SKYHOP_SERVE_HOLD_TIMEOUT"
"""Seconds a load balancer this worker starts holds a request while no replica is READY."""
WATCH_HELD_S = 300.0
"""How long one ``watch_for_held`` watches before it returns (the controller starts the next)."""
_WATCH_EVERY_S = 0.2


class HeldWatch(StrEnum):
    """How a ``watch_for_held`` ended."""

    HELD = "held"
    """The load balancer holds a request for want of a READY replica."""
    QUIET = "quiet"
    """None came within ``WATCH_HELD_S``."""
    NO_LOAD_BALANCER = "no_load_balancer"
    """The load balancer is not running (the controller's next sync starts it)."""


class LoadBalancerSync(BaseModel):
    service: str
    policy: LoadBalancingPolicy
    replicas: list[ReplicaEndpoint]
    port: int = 0
    """The endpoint's port to start on (the previous one's); 0: a free one."""


class ReplicaPortInput(BaseModel):
    handle: ClusterHandle
    wanted: int


class ReplicaProbe(BaseModel):
    handle: ClusterHandle
    job_key: str
    port: int
    probe: ReadinessProbe


class ProbeAnswer(BaseModel):
    ready: bool
    ended: bool = False
    """The replica's run has ended: it will never be ready again."""
    message: str = ""


def load_balancer_folder(service: str) -> Path:
    return skyhop_home() / "serve" / service


def _record_file(service: str) -> Path:
    return load_balancer_folder(service) / "load_balancer.json"


def _token_file(service: str) -> Path:
    return load_balancer_folder(service) / "control.token"


def _live(service: str) -> LoadBalancerInfo | None:
    """The recorded load balancer, if its process still runs (a reused pid runs something else)."""
    try:
        info = LoadBalancerInfo.model_validate_json(_record_file(service).read_text())
        cmdline = Path(f"/proc/{info.pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return None
    # A zombie's cmdline is empty; another program's does not name this service's token file.
    return info if str(_token_file(service)).encode() in cmdline else None


def hold_timeout() -> float:
    """``SKYHOP_SERVE_HOLD_TIMEOUT`` (seconds above 0), else ``ProxyTimeouts.hold``."""
    text = os.environ.get(HOLD_TIMEOUT_ENV, "").strip()
    if not text:
        return ProxyTimeouts.hold
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value < float("inf"):
        raise ValueError(f"{HOLD_TIMEOUT_ENV}={text!r}: give a number of seconds above 0")
    return value


def _start(request: LoadBalancerSync) -> LoadBalancerInfo:
    folder = load_balancer_folder(request.service)
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    token_file = _token_file(request.service)
    if not token_file.exists():
        create_token_file(token_file)
    log = folder / "load_balancer.log"
    extra = ["--hold-timeout", str(hold_timeout())]
    try:
        process = LoadBalancerProcess.start(
            token_file, log, policy=request.policy, port=request.port, extra=extra, detached=True
        )
    except LoadBalancerExited:
        if not request.port:
            raise
        # Its old port is taken meanwhile: a new endpoint is better than none.
        process = LoadBalancerProcess.start(
            token_file, log, policy=request.policy, extra=extra, detached=True
        )
    ready = process.ready
    if process.proc.stdout is not None:
        process.proc.stdout.close()  # it has said all it says there
    info = LoadBalancerInfo(
        pid=ready.pid, host=ready.host, port=ready.port, control_port=ready.control_port, log=str(log)
    )
    staged = _record_file(request.service).with_suffix(".tmp")
    staged.write_text(info.model_dump_json())
    staged.replace(_record_file(request.service))
    return info


def _control(service: str, info: LoadBalancerInfo) -> LoadBalancerControl:
    return LoadBalancerControl(info.control_port, read_token_file(_token_file(service)))


@activity.defn
async def sync_load_balancer(request: LoadBalancerSync) -> LoadBalancerInfo:
    """Make sure the service's load balancer runs (one per service) and serves ``replicas``."""
    info = _live(request.service)
    if info is None:
        info = await asyncio.to_thread(_start, request)
        activity.logger.info("load balancer of %s started: %s", request.service, info.endpoint)
    await _control(request.service, info).push(request.replicas)
    return info


@activity.defn
async def load_balancer_stats(service: str) -> LoadBalancerStats | None:
    """The request counts the autoscaler reads; None when the load balancer is not running."""
    info = _live(service)
    if info is None:
        return None
    try:
        return await _control(service, info).stats()
    except ControlError:
        return None


@activity.defn
async def watch_for_held(service: str) -> HeldWatch:
    """Watch a service that runs no replica: return as soon as its load balancer holds a request
    (a look every 0.2 s over loopback, heartbeating so a cancel reaches it), or after
    ``WATCH_HELD_S`` with none."""
    info = _live(service)
    if info is None:
        return HeldWatch.NO_LOAD_BALANCER
    control = _control(service, info)
    deadline = time.monotonic() + WATCH_HELD_S
    while time.monotonic() < deadline:
        try:
            stats = await control.stats()
        except ControlError:
            return HeldWatch.NO_LOAD_BALANCER
        if stats.held:
            return HeldWatch.HELD
        activity.heartbeat()
        await asyncio.sleep(_WATCH_EVERY_S)
    return HeldWatch.QUIET


@activity.defn
async def stop_load_balancer(service: str) -> None:
    """Stop the service's load balancer and remove its folder; nothing to do when it is gone."""
    info = _live(service)
    if info is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(info.pid, signal.SIGTERM)
        deadline = time.monotonic() + _STOP_GRACE_S
        while _running(info.pid) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        if _running(info.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(info.pid, signal.SIGKILL)
            while _running(info.pid):
                await asyncio.sleep(0.05)
    await asyncio.to_thread(shutil.rmtree, load_balancer_folder(service), True)


def _running(pid: int) -> bool:
    """Whether ``pid`` still runs; a load balancer this worker started and that ended is reaped
    here (else it stays a zombie), one another process started is its parent's to reap."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@activity.defn
async def choose_replica_port(request: ReplicaPortInput) -> int:
    """The port a replica's run listens on: the service's, unless its node shares this host with
    the other replicas (a loopback address: the ``local`` provider), where it gets a free one."""
    if not all(node.ip.startswith("127.") for node in request.handle.nodes):
        return request.wanted
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@activity.defn
async def probe_replica(request: ReplicaProbe) -> ProbeAnswer:
    """One readiness probe: has the replica's run ended, and does it answer the probe's request?"""
    node = request.handle.nodes[0]
    state = await get_provider(request.handle.offering.provider).runtime(node).job_state(request.job_key)
    if state is not None and state.status not in (NodeJobStatus.STARTING, NodeJobStatus.RUNNING):
        code = f" with exit code {state.exit_code}" if state.exit_code is not None else ""
        return ProbeAnswer(ready=False, ended=True, message=f"its run ended {state.status.value}{code}")
    return await asyncio.to_thread(_http_probe, node.ip, request.port, request.probe)


def _http_probe(host: str, port: int, probe: ReadinessProbe) -> ProbeAnswer:
    data = probe.post_data
    body = None if data is None else (json.dumps(data) if isinstance(data, dict) else data).encode()
    headers = dict(probe.headers)
    if isinstance(data, dict):
        headers.setdefault("Content-Type", "application/json")
    url = f"http://{host}:{port}{probe.path if probe.path.startswith('/') else '/' + probe.path}"
    request = urllib.request.Request(
        url, data=body, headers=headers, method="GET" if body is None else "POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=probe.timeout_seconds) as response:
            return ProbeAnswer(ready=True, message=f"{response.status} from {probe.path}")
    except urllib.error.HTTPError as exc:
        return ProbeAnswer(ready=False, message=f"{exc.code} from {probe.path}")
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return ProbeAnswer(ready=False, message=f"{probe.path}: {reason}")
