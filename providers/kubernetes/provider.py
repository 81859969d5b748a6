"""The ``kubernetes`` provider (``infra: k8s[/<context>]``): each node is a pod, reached through exec.

Contexts are regions: the kubeconfig's current one, or ``allowed_contexts`` in skyhop's config, each
a failover candidate. Offerings are read from the cluster itself (``offerings.py``). A launch
creates the cluster's missing pods (``pods.py``: named and labelled, so a retry finds them) and
admits them all or none: if the scheduler reports any pod unschedulable (FailedScheduling) and no
configured autoscaler may help, every pod is deleted at once and the attempt is a capacity error,
so failover tries the next context without a half-started gang holding its GPUs.

With an autoscaler configured, one context per launch may scale up: the first attempt's waits for
it (until it says NotTriggerScaleUp or ``provision_timeout`` passes). Once it has been asked
(TriggeredScaleUp) and the attempt fails anyway, the error's code is ``SCALE_UP_ASKED`` and the
launch's later attempts elsewhere carry ``scale_up_region``: their pods bear the autoscaler's
per-pod delay annotation (``pods.NO_SCALE_UP``), so no second cluster adds nodes for them in the
moment before an unschedulable one is deleted.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, replace
from typing import Any, ClassVar, TypeVar

from skyhop.providers.base import (
    CannotStopError,
    Capabilities,
    CheckResult,
    ClusterHandle,
    KubernetesAccess,
    NodeHandle,
    NodeStatus,
    Offering,
    Provider,
    ProvisionRequest,
)
from skyhop.providers.errors import (
    SCALE_UP_ASKED,
    CapacityError,
    InvalidRequestError,
    ProviderError,
    TransientError,
)
from skyhop.providers.extras import ExtraMissingError, missing_packages
from skyhop.providers.kubernetes import pods as k8s_pods
from skyhop.providers.kubernetes.client import KUBE_THREADS, ContextApi, allowed_contexts, open_context
from skyhop.providers.kubernetes.docker_sidecar import with_docker
from skyhop.providers.kubernetes.offerings import api_offerings
from skyhop.providers.kubernetes.pods import (
    PodState,
    cluster_selector,
    merge_pod_config,
    pod_manifest,
    pod_state,
)
from skyhop.providers.kubernetes.runtime import KubernetesNodeRuntime
from skyhop.providers.kubernetes.services import service_manifest, service_name
from skyhop.providers.kubernetes.settings import KubernetesSettings, SettingsError, load_settings
from skyhop.providers.runtime.shell import runtime_dir

__all__ = ["KubernetesProvider"]

log = logging.getLogger("skyhop.kubernetes")
T = TypeVar("T")
Obj = Mapping[str, Any]

_POLL_S = 0.2
"""How often a launch reads its pods while they are admitted (a list call: no write)."""
_START_TIMEOUT_S = 600.0
"""Bound on scheduled pods getting their containers running (image pulls take minutes)."""
_GONE_TIMEOUT_S = 120.0
_SCALE_UP = "TriggeredScaleUp"
_NO_SCALE_UP = "NotTriggerScaleUp"


async def _blocking(call: Callable[..., T], *args: Any) -> T:
    return await asyncio.get_running_loop().run_in_executor(KUBE_THREADS, call, *args)


def _settings() -> KubernetesSettings:
    try:
        return load_settings()
    except SettingsError as exc:
        raise InvalidRequestError(str(exc), "BadConfig", leftover=False) from None


def _rank(pod: Obj) -> int:
    return int(pod["metadata"]["labels"][k8s_pods.RANK_LABEL])


class KubernetesProvider(Provider):
    """Pods on the clusters of the kubeconfig's allowed contexts."""

    name = "kubernetes"
    capabilities: ClassVar[Capabilities] = Capabilities(
        multi_node=True,
        container_nodes=True,
        open_ports=True,
        custom_image=True,
        labels=True,
        disk_size=True,
        priority_classes=True,
    )

    # -- what there is -------------------------------------------------------------------------
    def _contexts(self, settings: KubernetesSettings) -> list[str]:
        return allowed_contexts(settings)

    def offerings(self) -> list[Offering]:
        if missing_packages("kubernetes"):
            return []
        try:
            settings = load_settings()
            contexts = self._contexts(settings)
        except (SettingsError, OSError, ValueError) as exc:
            log.warning("no Kubernetes offerings: %s", exc)
            return []
        found: list[Offering] = []
        for place, context in enumerate(contexts):
            try:
                # Contexts of equal price are tried in the order the user listed them, not by name.
                offered = api_offerings(open_context(settings, context))
                found += [o.model_copy(update={"preference": place}) for o in offered]
            except ProviderError as exc:
                log.warning("kubernetes context %s left out: %s", context, exc.message)
        return found

    def offerings_stamp(self) -> Hashable | None:
        """None: the offerings are the clusters' nodes, asked of their API at each optimization."""
        return None

    async def check(self) -> CheckResult:
        try:
            settings = load_settings()
            contexts = self._contexts(settings)
        except (SettingsError, ExtraMissingError, OSError, ValueError) as exc:
            return CheckResult(enabled=False, reason=str(exc), hint="pip install 'skyhop[kubernetes]'")
        if not contexts:
            where = settings.kubeconfig_path()
            return CheckResult(
                enabled=False,
                reason=f"no kubeconfig context ({where})",
                hint="set kubernetes.kubeconfig or kubernetes.allowed_contexts in ~/.skyhop/config.yaml",
            )

        async def probe(context: str) -> str | None:
            try:
                api = await _blocking(open_context, settings, context)
                await _blocking(lambda: api.call(api.core.list_namespaced_pod, api.namespace, limit=1))
            except ProviderError as exc:
                return exc.message
            return None

        failures = await asyncio.gather(*(probe(c) for c in contexts))
        usable = [c for c, why in zip(contexts, failures, strict=True) if why is None]
        words = [
            f"{c}: reachable" if why is None else f"{c}: {why}"
            for c, why in zip(contexts, failures, strict=True)
        ]
        return CheckResult(enabled=bool(usable), reason="contexts: " + "; ".join(words))

    # -- lifecycle -----------------------------------------------------------------------------
    async def _api(self, context: str | None) -> tuple[KubernetesSettings, ContextApi]:
        settings = _settings()
        return settings, await _blocking(open_context, settings, context)

    async def launch(self, request: ProvisionRequest) -> ClusterHandle:
        self.refuse_unsupported(request)
        settings, api = await self._api(request.offering.region)
        timeout = request.overrides.kubernetes.provision_timeout
        if timeout is not None:  # the task's config.kubernetes.provision_timeout wins over the file's
            settings = settings.model_copy(update={"provision_timeout": timeout})
        name, selector = request.cluster_name, cluster_selector(request.cluster_name)
        found = {_rank(p): p for p in await _blocking(api.pods, selector)}
        ended = [r for r, p in found.items() if pod_state(p)[0] is PodState.ENDED]
        if ended:  # a node lost earlier (evicted, deleted): its pod is replaced, under the same name
            await self._delete(api, selector, [found.pop(r)["metadata"]["name"] for r in ended])
        missing = [rank for rank in range(request.num_nodes) if rank not in found]
        # A pod's image is its machine image: ``image_id: docker:IMAGE`` or, as SkyPilot reads it
        # on Kubernetes, a plain ``image_id: IMAGE``.
        image = request.container_image or request.image_id or settings.image
        scale_up = settings.autoscaler is not None and request.scale_up_region in (None, api.context)
        if missing:
            terms = await self._gpu_terms(api, request.offering)
            for rank in missing:
                manifest = pod_manifest(
                    name,
                    rank,
                    request.offering,
                    request.node_request,
                    image,
                    terms,
                    scale_up=scale_up,
                    labels=request.labels,
                    disk_gib=request.disk_size,
                    priority_class=request.priority_class,
                    volumes=request.volumes,
                )
                manifest = merge_pod_config(
                    manifest, request.overrides.kubernetes, request.overrides.docker_arguments
                )
                if request.overrides.kubernetes.enable_docker:
                    manifest = with_docker(manifest, request.overrides.kubernetes.enable_docker)
                await _blocking(self._create, api, manifest)
        wait = _Wait(settings.unschedulable_wait_s if scale_up else 0.0, request.scale_up_region)
        try:
            running = await self._admit(api, name, request.num_nodes, image, wait)
        except ProviderError:
            await _blocking(self._delete_all, api, selector)
            raise
        if request.ports:
            await _blocking(self._expose, api, name, request.ports)
        nodes = await asyncio.gather(*(self._node(api, name, pod) for pod in running))
        await asyncio.gather(*(KubernetesNodeRuntime(n, api).prepare() for n in nodes))
        return ClusterHandle(cluster_name=name, offering=request.offering, nodes=list(nodes))

    async def _gpu_terms(self, api: ContextApi, offering: Offering) -> list[dict[str, Any]]:
        if not offering.accelerators:
            return []
        nodes = (await _blocking(api.call, api.core.list_node))["items"]
        (gpu,) = offering.accelerators
        terms = k8s_pods.gpu_node_terms(nodes, gpu)
        if not terms:
            raise CapacityError(
                f"kubernetes context {api.context!r}: no node is labelled with {gpu}", "NoGpuNode"
            )
        return terms

    @staticmethod
    def _create(api: ContextApi, manifest: dict[str, Any]) -> None:
        try:
            api.call(api.core.create_namespaced_pod, api.namespace, manifest)
        except InvalidRequestError as exc:
            if exc.code != "AlreadyExists":  # a retried create: the first one made it
                raise

    async def _admit(
        self, api: ContextApi, cluster_name: str, count: int, image: str, wait: _Wait
    ) -> list[Obj]:
        """The cluster's pods once all ``count`` run; a capacity or image error as soon as one cannot."""
        started, selector = time.monotonic(), cluster_selector(cluster_name)
        unschedulable_since: float | None = None
        while True:
            pods = {_rank(p): p for p in await _blocking(api.pods, selector)}
            states = {
                rank: pod_state(pods[rank]) if rank in pods else (PodState.ENDED, "deleted")
                for rank in range(count)
            }
            for rank, (state, why) in states.items():
                where = f"kubernetes context {api.context!r}: pod {k8s_pods.pod_name(cluster_name, rank)}"
                if state is PodState.BAD_IMAGE:
                    raise InvalidRequestError(
                        f"{where}: image {image!r} cannot be pulled ({why})", "ErrImagePull"
                    )
                if state is PodState.ENDED:
                    raise CapacityError(f"{where} ended before it ran ({why})", "PodEnded")
            stuck = [(rank, why) for rank, (state, why) in states.items() if state is PodState.UNSCHEDULABLE]
            if stuck:
                unschedulable_since = unschedulable_since or time.monotonic()
                waited = time.monotonic() - unschedulable_since
                if waited >= wait.seconds or _NO_SCALE_UP in await self._autoscaler_said(
                    api, [pods[rank] for rank, _ in stuck]
                ):
                    raise await self._unschedulable(api, list(pods.values()), stuck, count, wait)
            if all(state is PodState.RUNNING for state, _ in states.values()):
                return [pods[rank] for rank in range(count)]
            if time.monotonic() - started > _START_TIMEOUT_S:
                raise CapacityError(
                    f"kubernetes context {api.context!r}: pods not running after {_START_TIMEOUT_S:g}s",
                    "PodStartTimeout",
                )
            await asyncio.sleep(_POLL_S)

    @staticmethod
    async def _autoscaler_said(api: ContextApi, pods: list[Obj]) -> set[str]:
        """What the cluster autoscaler said about ``pods``: TriggeredScaleUp, NotTriggerScaleUp."""
        said: set[str] = set()
        for pod in pods:
            said |= {str(e.get("reason")) for e in await _blocking(api.events, pod)}
        return said & {_SCALE_UP, _NO_SCALE_UP}

    async def _unschedulable(
        self, api: ContextApi, pods: list[Obj], stuck: list[tuple[int, str]], count: int, wait: _Wait
    ) -> CapacityError:
        """The attempt's error; ``SCALE_UP_ASKED`` when this context's autoscaler was asked for nodes
        for any of its pods, so the launch asks no other context's."""
        where = f"kubernetes context {api.context!r}: {len(stuck)} of {count} pod(s) unschedulable"
        why = stuck[0][1]
        if wait.seconds and _SCALE_UP in await self._autoscaler_said(api, pods):
            return CapacityError(
                f"{where} after its autoscaler was asked for nodes (TriggeredScaleUp), all deleted "
                f"({why}); no other context's autoscaler is asked for this launch",
                SCALE_UP_ASKED,
            )
        if wait.scaled_elsewhere and wait.scaled_elsewhere != api.context:
            why += f"; not asking its autoscaler: context {wait.scaled_elsewhere!r}'s was for this launch"
        return CapacityError(f"{where}, all deleted ({why})", "FailedScheduling")

    async def _node(self, api: ContextApi, cluster_name: str, pod: Obj) -> NodeHandle:
        name, rank = pod["metadata"]["name"], _rank(pod)
        access = KubernetesAccess(context=api.context, namespace=api.namespace, pod=name)
        probe = await _blocking(api.exec, name, 'printf %s "$HOME"', None, 30.0)
        if probe.exit_status != 0 or not probe.stdout.startswith(b"/"):
            raise CapacityError(f"pod {name}: no home folder ({probe.error_text()})", "NoHome")
        return NodeHandle(
            rank=rank,
            instance_id=name,
            ip=pod["status"].get("podIP") or "",
            runtime_dir=runtime_dir(probe.stdout.decode(), cluster_name, rank),
            access=access,
        )

    @staticmethod
    def _expose(api: ContextApi, cluster_name: str, ports: list[str]) -> None:
        """The cluster's Service with ``ports`` as well as those it has (ports only ever open)."""
        try:
            api.call(api.core.create_namespaced_service, api.namespace, service_manifest(cluster_name, ports))
        except InvalidRequestError as exc:
            if exc.code != "AlreadyExists":
                raise
            name = service_name(cluster_name)
            there = api.call(api.core.read_namespaced_service, name, api.namespace)["spec"]["ports"]
            wanted = service_manifest(cluster_name, [*ports, *(str(p["port"]) for p in there)])
            if len(wanted["spec"]["ports"]) > len(there):
                patch = {"spec": {"ports": wanted["spec"]["ports"]}}
                api.call(api.core.patch_namespaced_service, name, api.namespace, patch)

    async def open_ports(self, handle: ClusterHandle, ports: list[str]) -> None:
        _, api = await self._api(handle.offering.region)
        await _blocking(self._expose, api, handle.cluster_name, ports)

    @staticmethod
    def _delete_all(api: ContextApi, selector: str) -> None:
        """Every object of the cluster: its pods and the Service of its ports."""
        api.call(api.core.delete_collection_namespaced_service, api.namespace, label_selector=selector)
        api.call(api.core.delete_collection_namespaced_pod, api.namespace, label_selector=selector)

    async def _delete(self, api: ContextApi, selector: str, names: list[str]) -> None:
        for name in names:
            try:
                await _blocking(api.call, api.core.delete_namespaced_pod, name, api.namespace)
            except ProviderError as exc:
                if exc.code != "NotFound":
                    raise
        await self._wait_gone(api, lambda: [p for p in api.pods(selector) if p["metadata"]["name"] in names])

    async def _wait_gone(self, api: ContextApi, remaining: Callable[[], list[Obj]]) -> None:
        deadline = time.monotonic() + _GONE_TIMEOUT_S
        while await _blocking(remaining):
            if time.monotonic() > deadline:
                raise TransientError(
                    f"kubernetes context {api.context!r}: pods still there after {_GONE_TIMEOUT_S:g}s"
                )
            await asyncio.sleep(_POLL_S)

    async def terminate(self, handle: ClusterHandle) -> None:
        _, api = await self._api(handle.offering.region)
        selector = cluster_selector(handle.cluster_name)
        await _blocking(self._delete_all, api, selector)
        await self._wait_gone(api, lambda: api.pods(selector))

    async def remove_untracked(self, cluster_name: str) -> list[str]:
        settings = _settings()
        removed: list[str] = []
        for context in self._contexts(settings):
            api = await _blocking(open_context, settings, context)
            selector = cluster_selector(cluster_name)
            removed += [p["metadata"]["name"] for p in await _blocking(api.pods, selector)]
            await _blocking(self._delete_all, api, selector)
            await self._wait_gone(api, lambda a=api, s=selector: a.pods(s))  # type: ignore[misc]
        return removed

    async def stop(self, handle: ClusterHandle) -> None:
        raise CannotStopError(
            f"Kubernetes pods cannot be stopped, only deleted: skyhop down {handle.cluster_name}"
        )

    async def node_statuses(self, handle: ClusterHandle) -> list[NodeStatus]:
        _, api = await self._api(handle.offering.region)
        pods = {
            p["metadata"]["name"]: p for p in await _blocking(api.pods, cluster_selector(handle.cluster_name))
        }
        return [_node_status(pods.get(node.instance_id)) for node in handle.nodes]

    def runtime(self, node: NodeHandle) -> KubernetesNodeRuntime:
        access = node.access
        if not isinstance(access, KubernetesAccess):
            raise TypeError(f"node {node.instance_id} is not a Kubernetes pod ({access.kind})")
        api = open_context(_settings(), access.context)
        return KubernetesNodeRuntime(node, replace(api, namespace=access.namespace))


@dataclass(frozen=True)
class _Wait:
    """How long an attempt waits on unschedulable pods for an autoscaler (0: not at all), and the
    context whose autoscaler the launch already asked for nodes, if another's."""

    seconds: float
    scaled_elsewhere: str | None


_TAKEN_BACK = ("Evicted", "Preempting", "DeletionByTaintManager")


def _node_status(pod: Obj | None) -> NodeStatus:
    """A pod evicted or preempted was taken back (a managed job recovers); one gone otherwise ended."""
    if pod is None:
        return NodeStatus.TERMINATED
    state, why = pod_state(pod)
    if state is not PodState.ENDED:
        return NodeStatus.UP
    disrupted = any(
        c.get("type") == "DisruptionTarget" for c in (pod.get("status") or {}).get("conditions") or []
    )
    return NodeStatus.PREEMPTED if disrupted or why.startswith(_TAKEN_BACK) else NodeStatus.TERMINATED
