"""Volumes, in SkyPilot's two places: the volume file ``skyhop volumes apply`` reads, and a task's
``volumes: {MOUNT_PATH: VOLUME_NAME}``.

A volume is a Kubernetes PersistentVolumeClaim (SkyPilot's ``k8s-pvc`` type), named after the
volume, in the namespace skyhop's pods go in. Its other types (a RunPod network volume, a node's
host path) are refused by name: skyhop has nowhere to put them. SkyPilot's ephemeral volumes (a
task's ``{size: ...}`` entry, created and deleted with the cluster) are refused too, for now.
"""

from __future__ import annotations

import re
from enum import StrEnum
from pathlib import Path, PurePosixPath

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from skyhop.spec.errors import SpecError
from skyhop.spec.limits import MAX_NAME_CHARS, MAX_PATH_CHARS
from skyhop.spec.yaml_reader import read_yaml_documents

__all__ = [
    "AccessMode",
    "VolumeConfig",
    "VolumeSpec",
    "check_volume_name",
    "load_volume_file",
    "task_volumes",
]

PVC_TYPE = "k8s-pvc"
_OTHER_TYPES = ("k8s-hostpath", "runpod-network-volume")
"""SkyPilot's other volume types: named in their refusal, as an unknown type is not."""
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SIZE = re.compile(r"^(\d+(?:\.\d+)?)\s*([KMGTP]i?|[KMGTP]B?)?$", re.IGNORECASE)
_KUBERNETES = ("k8s", "kubernetes")


class AccessMode(StrEnum):
    """A PVC's access modes, in Kubernetes' (and SkyPilot's) spelling."""

    READ_WRITE_ONCE = "ReadWriteOnce"
    READ_WRITE_ONCE_POD = "ReadWriteOncePod"
    READ_WRITE_MANY = "ReadWriteMany"
    READ_ONLY_MANY = "ReadOnlyMany"

    @property
    def one_node(self) -> bool:
        """Whether only one node (or pod) may mount it: a multi-node task cannot use it."""
        return self in (AccessMode.READ_WRITE_ONCE, AccessMode.READ_WRITE_ONCE_POD)


def check_volume_name(name: str) -> str:
    """``name`` if it can name a PVC (a DNS label: lower case letters, digits, '-'; at most 63)."""
    if len(name) > 63 or not _NAME.match(name):
        raise ValueError(
            f"volume name {name[:80]!r} must be 1-63 lower case letters, digits or '-', "
            "starting and ending with a letter or digit"
        )
    return name


class VolumeConfig(BaseModel):
    """The volume file's ``config``: how the PVC is made."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    storage_class_name: str | None = Field(default=None, min_length=1, max_length=MAX_NAME_CHARS)
    """None: the cluster's default StorageClass."""
    access_mode: AccessMode = AccessMode.READ_WRITE_ONCE
    """SkyPilot's default; ``ReadWriteMany`` for a volume several nodes or clusters mount at once."""


class VolumeSpec(BaseModel):
    """A volume file, as ``skyhop volumes apply`` takes it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    type: str = PVC_TYPE
    infra: str = "k8s"
    """``k8s`` (the current context, or the first allowed one) or ``k8s/<context>``."""
    size: str | None = None
    """A Kubernetes quantity (``100Gi``) or GiB as a number; required unless ``use_existing``."""
    use_existing: bool = False
    """Take the PVC of this name that is already there (made by anyone) instead of creating one."""
    labels: dict[str, str] = {}
    config: VolumeConfig = VolumeConfig()

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return check_volume_name(value)

    @field_validator("type")
    @classmethod
    def _type(cls, value: str) -> str:
        if value in _OTHER_TYPES:
            raise ValueError(f"volume type {value!r} is not supported; skyhop has volumes of type {PVC_TYPE}")
        if value != PVC_TYPE:
            raise ValueError(f"unknown volume type {value!r}; allowed: {PVC_TYPE}")
        return value

    @field_validator("infra")
    @classmethod
    def _infra(cls, value: str) -> str:
        cloud, _, context = value.partition("/")
        if cloud.lower() not in _KUBERNETES:
            raise ValueError(f"volumes are on Kubernetes: use k8s or k8s/<context>, got {value!r}")
        return f"k8s/{context}" if context else "k8s"

    @field_validator("size", mode="before")
    @classmethod
    def _size(cls, value: object) -> object:
        if isinstance(value, int | float) and not isinstance(value, bool):
            value = str(value)
        if isinstance(value, str):
            match = _SIZE.match(value.strip())
            if match is None or float(match.group(1)) <= 0:
                raise ValueError(f"size must be a quantity such as 100Gi or a number of GiB, got {value!r}")
            number, unit = match.groups()
            return f"{number}{_unit(unit)}"
        return value

    @property
    def context(self) -> str | None:
        """The Kubernetes context named by ``infra``; None: the default one."""
        return self.infra.partition("/")[2] or None

    @model_validator(mode="after")
    def _sized(self) -> VolumeSpec:
        if self.size is None and not self.use_existing:
            raise ValueError("size is required to create a volume (such as 100Gi), unless use_existing: true")
        return self


def _unit(unit: str | None) -> str:
    """A size's unit as Kubernetes spells it: GiB for a bare number, ``Gi`` for ``G``/``GB``/``gi``
    (SkyPilot's sizes are binary)."""
    if not unit:
        return "Gi"
    return unit[0].upper() + "i"


def load_volume_file(path: str) -> VolumeSpec:
    """The volume file at ``path`` (one YAML document), or ``SpecError`` naming the field."""
    if not Path(path).is_file():
        raise SpecError("", f"{path}: no such volume file")
    documents = read_yaml_documents(path)
    if len(documents) != 1 or not isinstance(documents[0], dict):
        raise SpecError("", f"{path}: a volume file is one mapping (name, type, infra, size, config)")
    try:
        return VolumeSpec.model_validate(documents[0])
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(part) for part in error["loc"])
        if error["type"] == "extra_forbidden":
            parent = VolumeConfig if field.startswith("config.") else VolumeSpec
            allowed = ", ".join(parent.model_fields)
            raise SpecError(field, f"unknown field; allowed: {allowed}") from None
        raise SpecError(field, error["msg"].removeprefix("Value error, ")) from None


def _mount_target(target: object) -> str:
    if not isinstance(target, str) or not target.startswith("/") or len(target) > MAX_PATH_CHARS:
        raise ValueError(f"mount path {str(target)[:80]!r} must be an absolute path (such as /mnt/data)")
    path = PurePosixPath(target)
    if ".." in path.parts or str(path) == "/":
        raise ValueError(f"mount path {target!r} must be a folder below / without '..'")
    return str(path)


def _volume_name(target: str, entry: object) -> str:
    """The volume an entry names: ``NAME``, or SkyPilot's long form ``{name: NAME}``."""
    if isinstance(entry, dict):
        if "size" in entry:
            raise ValueError(
                f"{target}: ephemeral volumes (size:) are not supported yet; create a volume with "
                "skyhop volumes apply and name it here"
            )
        extra = sorted(set(entry) - {"name"})
        if extra or "name" not in entry:
            raise ValueError(
                f"{target}: a volume entry is a name, or {{name: NAME}}; got fields {sorted(entry)}"
            )
        entry = entry["name"]
    if not isinstance(entry, str):
        raise ValueError(f"{target}: must name a volume, got {entry!r}")
    return check_volume_name(entry)


def task_volumes(value: object) -> object:
    """A task's ``volumes`` as ``{mount path: volume name}``, validated (other values are left for
    the model to refuse)."""
    if not isinstance(value, dict):
        return value
    volumes: dict[str, str] = {}
    for target, entry in value.items():
        path = _mount_target(target)
        if path in volumes:
            raise ValueError(f"mount path {path!r} is given twice")
        volumes[path] = _volume_name(path, entry)
    return volumes
