"""``skyhop volumes apply|ls|delete``: Kubernetes volumes (PVCs) that tasks mount by name.

Run here, with this machine's kubeconfig (as ``skyhop check`` does): a volume needs no cluster and
no worker, and its labelled PVC is its only record (``providers/kubernetes/volumes.py``), so there
is nothing to keep in step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from skyhop.cli.options import JsonOpt, Yes
from skyhop.cli.output import EXIT_USAGE, fail, info, print_json, table

if TYPE_CHECKING:
    from skyhop.providers.kubernetes.client import ContextApi
    from skyhop.providers.kubernetes.settings import KubernetesSettings

__all__ = ["volumes_app"]

volumes_app = typer.Typer(
    help="Kubernetes volumes (PVCs) that tasks mount with volumes: {PATH: NAME}.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


def _settings() -> tuple[KubernetesSettings, list[str]]:
    from skyhop.providers.extras import ExtraMissingError
    from skyhop.providers.kubernetes.client import allowed_contexts
    from skyhop.providers.kubernetes.settings import SettingsError, load_settings

    try:
        settings = load_settings()
        contexts = allowed_contexts(settings)
    except (SettingsError, ExtraMissingError, OSError, ValueError) as exc:
        fail(str(exc))
    if not contexts:
        fail(f"no kubeconfig context ({settings.kubeconfig_path()}): volumes are on Kubernetes")
    return settings, contexts


def _open(settings: KubernetesSettings, context: str) -> ContextApi:
    from skyhop.providers.errors import ProviderError
    from skyhop.providers.kubernetes.client import open_context

    try:
        return open_context(settings, context)
    except ProviderError as exc:
        fail(exc.message)


def _failed(exc: Exception) -> NoReturn:
    from skyhop.providers.errors import ProviderError

    fail(exc.message if isinstance(exc, ProviderError) else str(exc))


@volumes_app.command("apply")
def apply(
    path: Annotated[str, typer.Argument(help="A volume file: name, type: k8s-pvc, infra, size, config.")],
    yes: Yes = False,
) -> None:
    """Create the volume's PVC (again: a no-op), or take an existing PVC with use_existing: true."""
    from skyhop.providers.errors import ProviderError
    from skyhop.providers.kubernetes.volumes import VolumeError, apply_volume
    from skyhop.spec import SpecError
    from skyhop.spec.volume import load_volume_file

    try:
        spec = load_volume_file(path)
    except SpecError as exc:
        fail(str(exc), EXIT_USAGE)
    settings, contexts = _settings()
    context = spec.context or contexts[0]
    if not yes:
        what = "use the existing PVC" if spec.use_existing else f"create a {spec.size} PVC"
        typer.confirm(
            f"Volume {spec.name!r}: {what} in context {context!r}?", default=True, abort=True, err=True
        )
    try:
        info(apply_volume(_open(settings, context), spec))
    except (VolumeError, ProviderError) as exc:
        _failed(exc)


@volumes_app.command("ls")
def ls(json_output: JsonOpt = False) -> None:
    """List the volumes of every allowed Kubernetes context: size, status, the clusters using them."""
    from skyhop.providers.errors import ProviderError
    from skyhop.providers.kubernetes.volumes import VolumeRecord, list_volumes

    settings, contexts = _settings()
    records: list[VolumeRecord] = []
    for context in contexts:
        try:
            records += list_volumes(_open(settings, context))
        except ProviderError as exc:
            info(exc.message)
    if json_output:
        items = [
            {
                "name": r.name,
                "type": "k8s-pvc",
                "infra": f"k8s/{r.context}",
                "namespace": r.namespace,
                "size": r.size,
                "access_mode": r.access_mode,
                "storage_class": r.storage_class,
                "status": r.status,
                "created_by_skyhop": r.created_by_skyhop,
                "used_by": list(r.users),
            }
            for r in records
        ]
        print_json("volumes", items)
        return
    rows = [
        [r.name, "k8s-pvc", f"k8s/{r.context}", r.size, r.access_mode, r.status, ", ".join(r.users) or "-"]
        for r in records
    ]
    table(["NAME", "TYPE", "INFRA", "SIZE", "ACCESS MODE", "STATUS", "USED BY"], rows)


@volumes_app.command("delete")
def delete(
    names: Annotated[list[str], typer.Argument(help="Volumes to delete (their PVCs, with their data).")],
    yes: Yes = False,
) -> None:
    """Delete volumes; one a cluster's pod mounts is refused, one not found is named (exit 1)."""
    from skyhop.providers.errors import ProviderError
    from skyhop.providers.kubernetes.volumes import VolumeError, delete_volume, list_volumes

    settings, contexts = _settings()
    if not yes:
        typer.confirm(f"Delete volume {', '.join(names)} and its data?", default=False, abort=True, err=True)
    failed = False
    for name in dict.fromkeys(names):
        holders = []
        try:
            holders = [c for c in contexts if list_volumes(_open(settings, c), name)]
            if not holders:
                raise VolumeError(f"volume {name!r}: not found (nothing deleted)")
            for context in holders:
                info(delete_volume(_open(settings, context), name))
        except (VolumeError, ProviderError) as exc:
            info(exc.message if isinstance(exc, ProviderError) else str(exc))
            failed = True
    raise typer.Exit(1 if failed else 0)
