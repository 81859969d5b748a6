"""The nodes' kubelet: runs each bound pod's containers as real processes and reports their state.

Per pod: a sandbox (``sandbox.py``) gives ``podIP``; each container's ``command`` + ``args`` runs in it
(no command: ``sleep infinity``, as a fake image has no entrypoint of its own; a container runtime's
daemon image, ``docker:*dind*`` or ``moby/buildkit``, runs ``sleep infinity`` whatever its command:
``_DAEMON_IMAGES``), with its ``env``
(values, ``fieldRef``, ``secretKeyRef``), stdout and stderr into the container's log. A container whose
command is missing ends ``StartError`` (exit 128). When a process exits the container is
``terminated`` with ``Completed`` (0), ``Error`` or ``OOMKilled`` (137: over ``limits.memory``, or
``oom_kill``); ``restartPolicy`` restarts it after a back-off (``CrashLoopBackOff``, 1 s doubling to
10 s, shorter than the real 10 s to 5 min), else the pod ends ``Succeeded`` or ``Failed``.

A ``persistentVolumeClaim`` volume is the claim's folder (``<fake folder>/volumes/<namespace>/<claim>``,
kept while the claim lives, so the next pod that mounts it sees what the last one wrote); a container's
``volumeMounts`` of it must lie under ``/root``, the pod's own folder (``sandbox.py`` maps them). A
missing claim, or a mount elsewhere, leaves the pod ContainerCreating with a ``FailedMount`` event.

Deletion is graceful: SIGTERM, SIGKILL after the grace period, then the object is removed. A
node-pressure eviction (``evict``) kills the pod at once and leaves it ``Failed``/``Evicted`` with a
``DisruptionTarget`` condition. When a single-container pod's container exits, the pod's other
processes (exec sessions, daemons) die with it, as a container's PID namespace does.
"""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import signal
import subprocess
import threading
import time
import traceback
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.fakes.kubernetes.events import record_event
from tests.fakes.kubernetes.nodes import GPU_LABELS, GPU_RESOURCES
from tests.fakes.kubernetes.quantity import parse_quantity
from tests.fakes.kubernetes.sandbox import Network, Sandbox
from tests.fakes.kubernetes.status import StatusError, timestamp
from tests.fakes.kubernetes.store import Store
from tests.helpers import group_members

__all__ = ["Kubelet"]

Obj = dict[str, Any]
_PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass
class Container:
    spec: Obj
    env: dict[str, str]
    logs: Path
    proc: subprocess.Popen[bytes] | None = None
    started_at: str = ""
    restarts: int = 0
    oom: bool = False
    running: bool = False
    terminated: Obj | None = None
    last: Obj | None = None
    waiting: Obj | None = None
    retry_at: float = 0.0
    backoff: float = 1.0
    container_id: str = field(default_factory=lambda: uuid.uuid4().hex * 2)

    @property
    def name(self) -> str:
        return str(self.spec["name"])

    def log_file(self, previous: bool = False) -> Path:
        return self.logs / f"{self.restarts - 1 if previous else self.restarts}.log"

    def state(self) -> Obj:
        if self.running:
            return {"running": {"startedAt": self.started_at}}
        if self.terminated is not None:
            return {"terminated": self.terminated}
        return {"waiting": self.waiting or {"reason": "ContainerCreating"}}


@dataclass
class PodRun:
    uid: str
    namespace: str
    name: str
    node: str
    policy: str
    sandbox: Sandbox
    containers: list[Container]
    grace: float = 30.0
    kill_at: float | None = None
    """Set once deletion began: SIGKILL at this time if the containers still run."""
    evicted: str = ""
    started: str = field(default_factory=timestamp)


_DAEMON_IMAGES = ("docker", "moby/buildkit")
"""Repositories whose image runs a container runtime's daemon (``dockerd``, ``buildkitd``) this machine
cannot run as a plain process, unprivileged: their containers run ``sleep infinity`` in its place, so
a pod with a Docker sidecar is Ready, as on a real cluster, but nothing answers on the daemon's socket.
Of ``docker``, only the dind tags: its others are the CLI."""


def _is_daemon_image(image: str) -> bool:
    name = image.split("@")[0].removeprefix("docker.io/").removeprefix("library/")
    repository, _, tag = name.rpartition(":") if ":" in name.rsplit("/", 1)[-1] else (name, "", "")
    return repository in _DAEMON_IMAGES and (repository != "docker" or "dind" in tag)


def _argv(spec: Obj) -> list[str]:
    if _is_daemon_image(str(spec.get("image", ""))):
        return ["sleep", "infinity"]
    argv = [*(spec.get("command") or []), *(spec.get("args") or [])]
    return [str(a) for a in argv] or ["sleep", "infinity"]


def _field_ref(pod: Obj, path: str, ip: str) -> str:
    meta = pod["metadata"]
    if path.startswith("metadata.labels['"):
        return str((meta.get("labels") or {}).get(path[len("metadata.labels['") : -2], ""))
    values = {
        "metadata.name": meta["name"],
        "metadata.namespace": meta["namespace"],
        "metadata.uid": meta["uid"],
        "spec.nodeName": pod["spec"].get("nodeName", ""),
        "spec.serviceAccountName": pod["spec"].get("serviceAccountName", "default"),
        "status.podIP": ip,
        "status.hostIP": ip,
    }
    return str(values.get(path, ""))


class ConfigError(Exception):
    """The container cannot be configured (``CreateContainerConfigError``)."""


class MountError(Exception):
    """A volume cannot be mounted (``FailedMount``): the pod waits, as a kubelet retries mounts."""


class Kubelet:
    def __init__(self, store: Store, network: Network, folder: Path) -> None:
        self.store, self.network, self.folder = store, network, folder
        self.lock = threading.RLock()
        self.runs: dict[str, PodRun] = {}
        self.errors: list[str] = []
        """Tracebacks of reconcile passes that failed (the loop goes on; the fixture fails on any)."""
        self.failed_mounts: set[str] = set()
        """Pods (uid) whose FailedMount was recorded: once, not on every pass."""
        self.unpullable: set[str] = set()
        """Images whose pull fails (``ErrImagePull``, then ``ImagePullBackOff``)."""

    # -- the loop -------------------------------------------------------------------------------
    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            seen = self.store.revision
            with self.lock:
                try:
                    self.reconcile()
                except Exception:
                    self.errors.append(traceback.format_exc())
            with self.store.lock:
                if self.store.revision == seen:
                    self.store.changed.wait(0.2)

    def reconcile(self) -> None:
        pods, _ = self.store.list("pods")
        nodes = {n["metadata"]["name"] for n in self.store.list("nodes")[0]}
        present = {p["metadata"]["uid"] for p in pods}
        for uid in [u for u in self.runs if u not in present]:
            self._teardown(self.runs.pop(uid))
        for pod in pods:
            uid, node = pod["metadata"]["uid"], pod["spec"].get("nodeName")
            if not node:
                continue
            run = self.runs.get(uid)
            try:
                if node not in nodes:
                    self._collect(pod)
                    continue
                if run is None:
                    if pod["metadata"].get("deletionTimestamp"):
                        self.store.remove("pods", pod["metadata"]["namespace"], pod["metadata"]["name"])
                    elif pod["status"].get("phase") not in ("Succeeded", "Failed"):
                        self._start(pod)
                    continue
                if pod["metadata"].get("deletionTimestamp") and run.kill_at is None:
                    self._begin_stop(run, pod)
                self._tick(run, pod)
            except StatusError:  # the pod went away meanwhile; the next pass tears it down
                continue

    def _collect(self, pod: Obj) -> None:
        """PodGC: a pod bound to a node that no longer exists is deleted at once."""
        namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]

        def disrupted(obj: Obj) -> None:
            obj["status"].setdefault("conditions", []).append(
                {
                    "type": "DisruptionTarget",
                    "status": "True",
                    "lastProbeTime": None,
                    "lastTransitionTime": timestamp(),
                    "reason": "DeletionByPodGC",
                    "message": "PodGC: node no longer exists",
                }
            )

        self.store.update("pods", namespace, name, disrupted)
        self.store.remove("pods", namespace, name)

    # -- starting -------------------------------------------------------------------------------
    def _start(self, pod: Obj) -> None:
        meta, spec = pod["metadata"], pod["spec"]
        gpus = sum(
            int(parse_quantity((c.get("resources") or {}).get("limits", {}).get(resource, 0)))
            for c in spec["containers"]
            for resource in GPU_RESOURCES
        )
        node = self.store.find("nodes", "", spec["nodeName"]) or {"metadata": {"labels": {}}}
        labels = node["metadata"].get("labels") or {}
        product = next((labels[k] for k in GPU_LABELS if k in labels), "NVIDIA-GPU")
        try:
            mounts = self._claim_mounts(pod)
        except MountError as error:
            if meta["uid"] not in self.failed_mounts:
                self.failed_mounts.add(meta["uid"])
                record_event(
                    self.store, pod, "Warning", "FailedMount", str(error), "kubelet", spec["nodeName"]
                )
            return
        try:
            sandbox = self.network.sandbox(
                meta["uid"], meta["name"], [product.replace("-", " ")] * gpus, mounts
            )
        except (OSError, RuntimeError, subprocess.CalledProcessError) as error:
            # The pod stays ContainerCreating and is tried again on the next change, as kubelets do.
            message = f"Failed to create pod sandbox: {error}"
            record_event(
                self.store, pod, "Warning", "FailedCreatePodSandBox", message, "kubelet", spec["nodeName"]
            )
            return
        containers = []
        for index, container in enumerate(spec["containers"]):
            env = {"NVIDIA_VISIBLE_DEVICES": ",".join(str(i) for i in range(gpus))} if gpus else {}
            holder = Container(container, env, sandbox.folder / "logs" / container["name"])
            holder.logs.mkdir(parents=True, exist_ok=True)
            try:
                env.update(self._env(pod, container, sandbox.ip))
            except ConfigError as error:
                holder.waiting = {"reason": "CreateContainerConfigError", "message": str(error)}
            holder.container_id = f"{meta['uid'].replace('-', '')}{index:08d}"
            containers.append(holder)
        run = PodRun(
            meta["uid"],
            meta["namespace"],
            meta["name"],
            spec["nodeName"],
            spec["restartPolicy"],
            sandbox,
            containers,
            float(spec.get("terminationGracePeriodSeconds", 30)),
        )
        self.runs[run.uid] = run
        self._write(run)
        for container in containers:
            if container.waiting is None:
                self._launch(run, container, pod)

    def _claim_mounts(self, pod: Obj) -> list[tuple[str, Path]]:
        """``(path under /root, the claim's folder)`` for every volumeMount of a PVC volume."""
        namespace = pod["metadata"]["namespace"]
        claims = {
            v["name"]: v["persistentVolumeClaim"]["claimName"]
            for v in pod["spec"].get("volumes") or []
            if "persistentVolumeClaim" in v
        }
        mounts = []
        for container in pod["spec"]["containers"]:
            for mount in container.get("volumeMounts") or []:
                claim = claims.get(mount["name"])
                if claim is None:
                    continue
                if self.store.find("persistentvolumeclaims", namespace, claim) is None:
                    raise MountError(f'persistentvolumeclaim "{claim}" not found')
                path = str(mount["mountPath"]).rstrip("/")
                if not path.startswith("/root/"):
                    raise MountError(f"the fake mounts volumes only under /root, not at {path}")
                folder = self.folder / "volumes" / namespace / claim
                folder.mkdir(parents=True, exist_ok=True)
                mounts.append((path, folder))
        return mounts

    def _env(self, pod: Obj, container: Obj, ip: str) -> dict[str, str]:
        env: dict[str, str] = {}
        namespace = pod["metadata"]["namespace"]
        for source in container.get("envFrom") or []:
            if "secretRef" in source:
                secret = self.store.find("secrets", namespace, source["secretRef"]["name"])
                if secret is None:
                    raise ConfigError(f'secret "{source["secretRef"]["name"]}" not found')
                env.update({k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()})
        for item in container.get("env") or []:
            value_from = item.get("valueFrom") or {}
            if "fieldRef" in value_from:
                env[item["name"]] = _field_ref(pod, value_from["fieldRef"]["fieldPath"], ip)
            elif "secretKeyRef" in value_from:
                ref = value_from["secretKeyRef"]
                secret = self.store.find("secrets", namespace, ref["name"])
                if secret is None or ref["key"] not in (secret.get("data") or {}):
                    missing = (
                        f'secret "{ref["name"]}" not found'
                        if secret is None
                        else (f"couldn't find key {ref['key']} in Secret {namespace}/{ref['name']}")
                    )
                    raise ConfigError(missing)
                env[item["name"]] = base64.b64decode(secret["data"][ref["key"]]).decode()
            else:
                env[item["name"]] = str(item.get("value", ""))
        return env

    def _launch(self, run: PodRun, container: Container, pod: Obj) -> None:
        image = str(container.spec["image"])
        if image in self.unpullable:
            reason = "ImagePullBackOff" if container.waiting else "ErrImagePull"
            message = (
                f'Back-off pulling image "{image}"'
                if container.waiting
                else f'Failed to pull image "{image}": rpc error: code = NotFound desc = '
                "failed to pull and unpack "
                f'image "{image}": not found'
            )
            container.waiting = {"reason": reason, "message": message}
            record_event(
                self.store,
                pod,
                "Warning",
                "Failed" if reason == "ErrImagePull" else "BackOff",
                message,
                "kubelet",
                run.node,
            )
            container.retry_at = time.monotonic() + 1
            return
        argv = _argv(container.spec)
        path = run.sandbox.environment(container.env)["PATH"]
        now = timestamp()
        if shutil.which(argv[0], path=path) is None:
            container.waiting, container.started_at = None, now
            container.terminated = {
                "exitCode": 128,
                "reason": "StartError",
                "message": "failed to create containerd task: failed to create shim task: "
                "OCI runtime create "
                f'failed: runc create failed: unable to start container process: exec: "{argv[0]}": '
                "executable file not found in $PATH: unknown",
                "startedAt": "1970-01-01T00:00:00Z",
                "finishedAt": now,
                "containerID": f"containerd://{container.container_id}",
            }
            self._after_exit(run, container)
            return
        workdir = str(container.spec.get("workingDir") or run.sandbox.home)
        with open(container.log_file(), "ab") as log:
            container.proc = run.sandbox.spawn(argv, container.env, workdir, subprocess.DEVNULL, log, log)
        container.waiting, container.terminated = None, None
        container.running, container.started_at = True, now
        record_event(
            self.store, pod, "Normal", "Started", f"Started container {container.name}", "kubelet", run.node
        )

    # -- running --------------------------------------------------------------------------------
    def _tick(self, run: PodRun, pod: Obj) -> None:
        now = time.monotonic()
        for container in run.containers:
            proc = container.proc
            if container.running and proc is not None:
                if proc.poll() is None:
                    self._enforce_memory(container)
                    continue
                code = proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
                reason = "OOMKilled" if container.oom else "Completed" if code == 0 else "Error"
                container.running, container.oom = False, False
                container.terminated = {
                    "exitCode": code,
                    "reason": reason,
                    "startedAt": container.started_at,
                    "finishedAt": timestamp(),
                    "containerID": f"containerd://{container.container_id}",
                }
                for pid in group_members(proc.pid):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                if len(run.containers) == 1 and not run.evicted:
                    for pid in run.sandbox.pids():
                        if run.sandbox.holder is None or pid != run.sandbox.holder.pid:
                            with contextlib.suppress(ProcessLookupError):
                                os.kill(pid, signal.SIGKILL)
                self._after_exit(run, container)
            elif container.retry_at and now >= container.retry_at and run.kill_at is None and not run.evicted:
                container.retry_at = 0.0
                if container.terminated is not None:
                    container.last, container.terminated = container.terminated, None
                    container.restarts += 1
                self._launch(run, container, pod)
        if run.kill_at is not None and (now >= run.kill_at or not any(c.running for c in run.containers)):
            self._finish_stop(run)
            return
        self._write(run)

    def _after_exit(self, run: PodRun, container: Container) -> None:
        assert container.terminated is not None
        failed = container.terminated["exitCode"] != 0
        restart = run.policy == "Always" or (run.policy == "OnFailure" and failed)
        if restart and run.kill_at is None and not run.evicted:
            container.retry_at = time.monotonic() + container.backoff
            container.backoff = min(container.backoff * 2, 10.0)
            pod_id = f"{run.name}_{run.namespace}({run.uid})"
            container.waiting = {
                "reason": "CrashLoopBackOff",
                "message": f"back-off {container.backoff:g}s restarting failed "
                f"container={container.name} pod={pod_id}",
            }

    def _enforce_memory(self, container: Container) -> None:
        limit = (container.spec.get("resources") or {}).get("limits", {}).get("memory")
        if limit is None or container.proc is None:
            return
        used = 0
        for pid in group_members(container.proc.pid):
            with contextlib.suppress(OSError, ValueError, IndexError):
                used += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * _PAGE
        if used > parse_quantity(limit):
            self._oom(container)

    def _oom(self, container: Container) -> None:
        if container.proc is not None and container.running:
            container.oom = True
            for pid in group_members(container.proc.pid) or [container.proc.pid]:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)

    # -- status ---------------------------------------------------------------------------------
    def _write(self, run: PodRun) -> None:
        containers = run.containers
        started = any(c.started_at for c in containers)
        finished = all(c.terminated is not None and not c.retry_at for c in containers)
        if run.evicted or (started and finished):
            phase = (
                "Succeeded"
                if all(c.terminated and c.terminated["exitCode"] == 0 for c in containers)
                else "Failed"
            )
            phase = "Failed" if run.evicted else phase
        else:
            phase = "Running" if started else "Pending"
        ready = all(c.running for c in containers)
        unready = [c.name for c in containers if not c.running]

        def write(pod: Obj) -> None:
            status = pod["status"]
            old = {c["type"]: c for c in status.get("conditions", [])}

            def condition(kind: str, true: bool, reason: str = "", message: str = "") -> Obj:
                value = "True" if true else "False"
                previous = old.get(kind)
                since = (
                    previous["lastTransitionTime"]
                    if previous and previous["status"] == value
                    else timestamp()
                )
                made: Obj = {
                    "type": kind,
                    "status": value,
                    "lastProbeTime": None,
                    "lastTransitionTime": since,
                }
                if reason:
                    made.update(reason=reason, message=message)
                return made

            not_ready = "PodCompleted" if phase in ("Succeeded", "Failed") else "ContainersNotReady"
            message = "" if ready else f"containers with unready status: [{' '.join(unready)}]"
            status["conditions"] = [
                *(c for c in old.values() if c["type"] in ("DisruptionTarget",)),
                condition("PodReadyToStartContainers", phase in ("Pending", "Running")),
                condition("Initialized", True),
                condition("Ready", ready, "" if ready else not_ready, message),
                condition("ContainersReady", ready, "" if ready else not_ready, message),
                *(c for c in old.values() if c["type"] == "PodScheduled"),
            ]
            status.update(
                phase=phase,
                hostIP=self.network.node_ip,
                hostIPs=[{"ip": self.network.node_ip}],
                podIP=run.sandbox.ip,
                podIPs=[{"ip": run.sandbox.ip}],
                startTime=run.started,
            )
            if run.evicted:
                status.update(reason="Evicted", message=run.evicted)
            status["containerStatuses"] = [
                {
                    "name": c.name,
                    "state": c.state(),
                    "lastState": {"terminated": c.last} if c.last else {},
                    "ready": c.running,
                    "restartCount": c.restarts,
                    "image": c.spec["image"],
                    "imageID": f"docker.io/library/{c.spec['image']}@sha256:{'0' * 64}",
                    "containerID": f"containerd://{c.container_id}",
                    "started": c.running,
                }
                for c in containers
            ]

        self.store.update("pods", run.namespace, run.name, write)

    # -- stopping -------------------------------------------------------------------------------
    def _begin_stop(self, run: PodRun, pod: Obj) -> None:
        grace = float(pod["metadata"].get("deletionGracePeriodSeconds", run.grace))
        run.kill_at = time.monotonic() + grace
        for container in run.containers:
            container.retry_at = 0.0
            if container.running and container.proc is not None:
                message = f"Stopping container {container.name}"
                record_event(self.store, pod, "Normal", "Killing", message, "kubelet", run.node)
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(container.proc.pid, signal.SIGTERM)

    def _finish_stop(self, run: PodRun) -> None:
        run.sandbox.kill()
        for container in run.containers:
            if container.proc is not None:
                container.proc.wait()
        self._tick_exits(run)
        with contextlib.suppress(StatusError):
            self._write(run)
            self.store.remove("pods", run.namespace, run.name)
        self._teardown(self.runs.pop(run.uid))

    def _tick_exits(self, run: PodRun) -> None:
        for container in run.containers:
            proc = container.proc
            if container.running and proc is not None and proc.poll() is not None:
                code = proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
                container.running = False
                container.terminated = {
                    "exitCode": code,
                    "reason": "Completed" if code == 0 else "Error",
                    "startedAt": container.started_at,
                    "finishedAt": timestamp(),
                    "containerID": f"containerd://{container.container_id}",
                }

    def _teardown(self, run: PodRun) -> None:
        self.network.remove(run.sandbox)
        for container in run.containers:
            if container.proc is not None and container.proc.poll() is None:
                container.proc.kill()
                container.proc.wait()

    # -- commands (tests) -----------------------------------------------------------------------
    def running(self, namespace: str, name: str) -> PodRun | None:
        """The pod's run, without waiting for a reconcile pass (which may be starting sandboxes), so
        exec and logs never stall behind pod starts."""
        runs = list(self.runs.values())
        return next((r for r in runs if (r.namespace, r.name) == (namespace, name)), None)

    def _find(self, namespace: str, name: str) -> PodRun:
        for run in self.runs.values():
            if (run.namespace, run.name) == (namespace, name):
                return run
        raise KeyError(f"pod {namespace}/{name} is not running on any node")

    def oom_kill(self, namespace: str, name: str, container: str | None = None) -> None:
        with self.lock:
            run = self._find(namespace, name)
            for target in run.containers:
                if container in (None, target.name):
                    self._oom(target)

    def evict(self, namespace: str, name: str, resource: str) -> None:
        with self.lock:
            run = self._find(namespace, name)
            run.evicted = (
                f"The node was low on resource: {resource}. Threshold quantity: 100Mi, available: 12Mi. "
            )
            pod = self.store.get("pods", namespace, name)

            def disrupted(obj: Obj) -> None:
                obj["status"].setdefault("conditions", []).append(
                    {
                        "type": "DisruptionTarget",
                        "status": "True",
                        "lastProbeTime": None,
                        "lastTransitionTime": timestamp(),
                        "reason": "TerminationByKubelet",
                        "message": run.evicted,
                    }
                )

            self.store.update("pods", namespace, name, disrupted)
            record_event(self.store, pod, "Warning", "Evicted", run.evicted, "kubelet", run.node)
            run.sandbox.kill()
            for target in run.containers:
                target.retry_at = 0.0
                if target.proc is not None:
                    target.proc.wait()
            self._tick_exits(run)
            self._write(run)

    def stop(self) -> None:
        with self.lock:
            for run in list(self.runs.values()):
                self._teardown(run)
            self.runs.clear()
