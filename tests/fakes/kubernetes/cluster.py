"""``FakeKubernetes``: the API server, scheduler and kubelet of a one-machine cluster, and the commands
tests use to make things happen to it (a node fills up or goes away, a pod is evicted or OOM-killed).
"""

from __future__ import annotations

import base64
import os
import secrets as token_source
import threading
from fractions import Fraction
from pathlib import Path
from typing import Any

import yaml

from tests.fakes.kubernetes.admission import admit
from tests.fakes.kubernetes.api import KubeApi
from tests.fakes.kubernetes.autoscaler import Autoscaler, NodeGroup
from tests.fakes.kubernetes.events import record_event
from tests.fakes.kubernetes.kubelet import Kubelet
from tests.fakes.kubernetes.nodes import NodeSpec
from tests.fakes.kubernetes.sandbox import Network
from tests.fakes.kubernetes.scheduler import Scheduler, free_resources
from tests.fakes.kubernetes.store import Store
from tests.fakes.kubernetes.tls import make_certificates
from tests.helpers import wait_for
from tests.netns import can_netns

__all__ = ["FakeKubernetes", "write_kubeconfig"]

Obj = dict[str, Any]
_SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


def _amount(resource: str, value: Fraction) -> str:
    if resource == "cpu":
        return f"{int(value * 1000)}m"
    return str(int(value))


class FakeKubernetes:
    """A cluster with ``nodes``, serving on ``url``: HTTPS on loopback with a CA of its own and bearer
    ``token`` (``tls=False``: plain HTTP, see ``api.py``).

    ``loopback``: None picks namespace mode where root allows it, unless ``SKYHOP_TEST_K8S_LOOPBACK=1``
    (``sandbox.py`` describes both modes).
    ``node_groups``: a cluster autoscaler adds nodes of these groups for unschedulable pods.
    """

    def __init__(
        self,
        folder: Path,
        nodes: list[NodeSpec],
        *,
        loopback: bool | None = None,
        context: str = "fake",
        node_groups: list[NodeGroup] | None = None,
        tls: bool = True,
    ) -> None:
        self.folder, self.context, self.tls = folder, context, tls
        self.ca_pem = b""
        self.node_specs = list(nodes)
        forced = os.environ.get("SKYHOP_TEST_K8S_LOOPBACK") == "1"
        self.loopback = (forced or not can_netns()) if loopback is None else loopback
        self.token = token_source.token_hex(16)
        self.store = Store()
        self.network: Network | None = None
        self.kubelet: Kubelet | None = None
        self.api: KubeApi | None = None
        self.scheduler = Scheduler(self.store)
        self.autoscaler = Autoscaler(self.store, node_groups or [], self.add_node) if node_groups else None
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.url = ""

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> FakeKubernetes:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.network = Network(self.folder / "pods", self.loopback)
        self.kubelet = Kubelet(self.store, self.network, self.folder)
        for namespace in _SYSTEM_NAMESPACES:
            self.create_namespace(namespace)
        for spec in self.node_specs:
            self.add_node(spec)
        self.api = KubeApi(self.store, self.kubelet, self.token, require_token=self.tls)
        context = None
        if self.tls:
            certificates = make_certificates(self.folder / "pki")
            self.ca_pem, context = certificates.ca_pem, certificates.server_context()
        self.url = self.api.start(context)
        loops = [self.scheduler.run, self.kubelet.run] + ([self.autoscaler.run] if self.autoscaler else [])
        for target in loops:
            thread = threading.Thread(target=target, args=(self._stop,), daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        """Stop the loops, kill every pod's processes by pid, remove namespaces and the bridge."""
        self._stop.set()
        if self.api is not None:
            self.api.stopping.set()
        with self.store.lock:
            self.store.changed.notify_all()
        for thread in self._threads:
            thread.join(10)
        if self.kubelet is not None:
            self.kubelet.stop()
        if self.network is not None:
            self.network.close()
        if self.api is not None:
            self.api.stop()

    def __enter__(self) -> FakeKubernetes:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def kubeconfig(self, path: Path | None = None) -> Path:
        """A kubeconfig whose only context (``self.context``, current) is this cluster."""
        return write_kubeconfig(path or self.folder / "kubeconfig", [self])

    # -- reading --------------------------------------------------------------------------------
    def pod(self, name: str, namespace: str = "default") -> Obj | None:
        return self.store.find("pods", namespace, name)

    def pods(self, namespace: str | None = None) -> list[Obj]:
        return self.store.list("pods", namespace)[0]

    def events(self, name: str, namespace: str = "default") -> list[Obj]:
        """Events about object ``name``, oldest first (their names sort by time)."""
        events = self.store.list("events", namespace)[0]
        return sorted(
            (e for e in events if e["involvedObject"]["name"] == name), key=lambda e: e["metadata"]["name"]
        )

    def errors(self) -> list[str]:
        """What went wrong inside the fake: scheduler and kubelet failures, and requests that no route
        serves (a client asking for something this fake does not implement)."""
        assert self.kubelet is not None and self.api is not None
        scaler = self.autoscaler.errors if self.autoscaler else []
        return [*self.scheduler.errors, *self.kubelet.errors, *scaler, *self.api.violations]

    def writes(self) -> list[str]:
        """Every write request the API received, as ``METHOD path``."""
        assert self.api is not None
        return [
            f"{c.method} {c.path}" for c in self.api.calls if c.method in ("POST", "PUT", "PATCH", "DELETE")
        ]

    def wait_pod(self, name: str, phase: str, namespace: str = "default", timeout: float = 30) -> Obj:
        def reached() -> bool:
            pod = self.pod(name, namespace)
            return pod is not None and pod["status"].get("phase") == phase

        wait_for(reached, timeout, f"pod {namespace}/{name} to be {phase}")
        found = self.pod(name, namespace)
        assert found is not None
        return found

    # -- commands -------------------------------------------------------------------------------
    def create_namespace(self, name: str) -> None:
        namespace: Obj = {"metadata": {"name": name}}
        admit("namespaces", namespace)
        self.store.create("namespaces", "", namespace)

    def add_node(self, spec: NodeSpec) -> None:
        assert self.network is not None
        node = self.store.create("nodes", "", spec.object(self.network.node_ip))
        record_event(
            self.store,
            node,
            "Normal",
            "RegisteredNode",
            f"Node {spec.name} event: Registered Node {spec.name} in Controller",
            "node-controller",
        )

    def remove_node(self, name: str) -> None:
        """The node is gone (deleted, as a scaled-down node is): PodGC deletes its pods."""
        self.store.remove("nodes", "", name)

    def cordon(self, name: str, unschedulable: bool = True) -> None:
        def mark(node: Obj) -> None:
            node["spec"]["unschedulable"] = unschedulable or None
            if not unschedulable:
                node["spec"].pop("unschedulable", None)

        self.store.update("nodes", "", name, mark)

    def fill_node(self, name: str, namespace: str = "other-team") -> str:
        """Another tenant's pod takes everything the node has left; returns its name (delete it to free)."""
        if self.store.find("namespaces", "", namespace) is None:
            self.create_namespace(namespace)
        node = self.store.get("nodes", "", name)
        free = free_resources(node, self.pods())
        requests = {r: _amount(r, free[r]) for r in ("cpu", "memory", "nvidia.com/gpu") if free.get(r, 0) > 0}
        container = {
            "name": "hog",
            "image": "busybox:1.36",
            "command": ["sleep", "infinity"],
            "resources": {"requests": requests, "limits": dict(requests)},
        }
        pod: Obj = {
            "metadata": {"generateName": f"fill-{name}-"},
            "spec": {"nodeName": name, "containers": [container], "terminationGracePeriodSeconds": 0},
        }
        admit("pods", pod)
        return str(self.store.create("pods", namespace, pod)["metadata"]["name"])

    def oom_kill(self, name: str, namespace: str = "default", container: str | None = None) -> None:
        assert self.kubelet is not None
        self.kubelet.oom_kill(namespace, name, container)

    def evict(self, name: str, namespace: str = "default", resource: str = "memory") -> None:
        """Node-pressure eviction: killed at once, the pod stays ``Failed`` with reason ``Evicted``."""
        assert self.kubelet is not None
        self.kubelet.evict(namespace, name, resource)

    def preempt(self, name: str, namespace: str = "default") -> None:
        """The scheduler preempts the pod for a higher-priority one: DisruptionTarget, then deletion."""
        assert self.api is not None
        pod = self.store.get("pods", namespace, name)
        self.api.disrupt(
            namespace,
            name,
            "PreemptionByScheduler",
            "default-scheduler: preempting to accommodate a higher priority pod",
        )
        record_event(
            self.store,
            pod,
            "Normal",
            "Preempted",
            f"Preempted by pod {pod['metadata']['uid']} on node {pod['spec'].get('nodeName')}",
            "default-scheduler",
        )
        self.api.delete_pod(namespace, name, None)

    def fail_image_pull(self, image: str) -> None:
        """Pulling ``image`` fails from now on (``ErrImagePull``, then ``ImagePullBackOff``)."""
        assert self.kubelet is not None
        self.kubelet.unpullable.add(image)


def _cluster_entry(fake: FakeKubernetes) -> dict[str, str]:
    entry = {"server": fake.url}
    if fake.ca_pem:
        entry["certificate-authority-data"] = base64.b64encode(fake.ca_pem).decode()
    return entry


def write_kubeconfig(path: Path, clusters: list[FakeKubernetes], current: str | None = None) -> Path:
    """One kubeconfig with a context per fake (named by its ``context``); ``current`` or the first."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": c.context, "cluster": _cluster_entry(c)} for c in clusters],
        "users": [{"name": c.context, "user": {"token": c.token}} for c in clusters],
        "contexts": [
            {"name": c.context, "context": {"cluster": c.context, "user": c.context, "namespace": "default"}}
            for c in clusters
        ],
        "current-context": current or clusters[0].context,
        "preferences": {},
    }
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path
