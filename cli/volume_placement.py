"""A task's ``volumes`` decide where it runs: the Kubernetes context that holds them.

Looked up before anything starts (``launch``, ``--dryrun``, ``jobs launch``, ``serve up``), from this
machine's kubeconfig, as ``skyhop volumes`` does: each named volume must exist in one allowed
context, all in the same one, and the task is pinned there (``resources.infra: k8s/<context>``, on
every ``any_of``/``ordered`` alternative). A task whose resources point elsewhere, or a multi-node
task on a volume only one node may mount, is refused in one line before any plan.
"""

from __future__ import annotations

from typing import Any

from skyhop.spec import SpecError, Task

__all__ = ["VolumeLookupError", "pinned_to_volumes"]


class VolumeLookupError(SpecError):
    """A task's volume cannot be found, or its context cannot be asked."""


def _find(names: list[str]) -> dict[str, list[tuple[str, Any]]]:
    """``volume name -> [(context, VolumeRecord)]`` over every allowed context."""
    from skyhop.providers.errors import ProviderError
    from skyhop.providers.extras import ExtraMissingError
    from skyhop.providers.kubernetes.client import allowed_contexts, open_context
    from skyhop.providers.kubernetes.settings import SettingsError, load_settings
    from skyhop.providers.kubernetes.volumes import list_volumes

    field = "volumes"
    try:
        settings = load_settings()
        contexts = allowed_contexts(settings)
    except (SettingsError, ExtraMissingError, OSError, ValueError) as exc:
        raise VolumeLookupError(field, f"cannot plan: volumes cannot be looked up: {exc}") from None
    if not contexts:
        raise VolumeLookupError(
            field,
            f"cannot plan: volumes are on Kubernetes and no kubeconfig context is configured "
            f"({settings.kubeconfig_path()})",
        )
    found: dict[str, list[tuple[str, Any]]] = {name: [] for name in names}
    for context in contexts:
        try:
            api = open_context(settings, context)
            for record in list_volumes(api):
                if record.name in found:
                    found[record.name].append((context, record))
        except ProviderError as exc:
            raise VolumeLookupError(
                field, f"cannot plan: volumes cannot be looked up: {exc.message}"
            ) from None
    return found


def pinned_to_volumes(task: Task) -> Task:
    """``task`` pinned to the Kubernetes context of its volumes (unchanged without volumes)."""
    if not task.volumes:
        return task
    names = list(dict.fromkeys(task.volumes.values()))
    found = _find(names)
    contexts: dict[str, str] = {}
    for path, name in task.volumes.items():
        where = found[name]
        if not where:
            raise VolumeLookupError(
                f"volumes.{path}",
                f"volume {name!r} not found; create it with skyhop volumes apply VOLUME.yaml",
            )
        if len(where) > 1:
            raise VolumeLookupError(
                f"volumes.{path}",
                f"volume {name!r} is in contexts {', '.join(c for c, _ in where)}; list only one in "
                "kubernetes.allowed_contexts",
            )
        context, record = where[0]
        if record.one_node and task.num_nodes > 1:
            raise VolumeLookupError(
                f"volumes.{path}",
                f"volume {name!r} is {record.access_mode}: one node may mount it, the task has "
                f"{task.num_nodes}; use a ReadWriteMany volume",
            )
        contexts[name] = context
    if len(set(contexts.values())) > 1:
        listed = ", ".join(f"{n} in {c}" for n, c in contexts.items())
        raise VolumeLookupError("volumes", f"volumes are in different Kubernetes contexts ({listed})")
    return _pinned(task, next(iter(contexts.values())), names[0])


def _pinned(task: Task, context: str, volume: str) -> Task:
    """``task`` with every alternative on ``k8s/<context>``; refused where one says otherwise."""
    for index, alternative in enumerate(task.resources.alternatives):
        cloud, region = alternative.cloud, alternative.region
        if cloud not in (None, "kubernetes") or region not in (None, context):
            field = (
                "resources.infra"
                if len(task.resources.alternatives) == 1
                else f"resources.alternative {index}"
            )
            raise VolumeLookupError(
                field,
                f"{alternative.infra!r} conflicts with volume {volume!r}, which is in Kubernetes context "
                f"{context!r}; use infra: k8s/{context} or leave it out",
            )
    data: dict[str, Any] = task.resources.model_dump(exclude_defaults=True)
    data["infra"] = f"k8s/{context}"
    for choices in ("any_of", "ordered"):
        if data.get(choices):
            data[choices] = [{**item, "infra": f"k8s/{context}"} for item in data[choices]]
    return Task.model_validate({**task.model_dump(exclude_defaults=True), "resources": data})
