"""``Resources``: what a task needs from one node, in SkyPilot's field names and forms.

Inputs are normalised once, here, so the rest of skyhop (and any Temporal client sending JSON)
sees one canonical form: ``cpus``/``memory`` as strings like ``"4+"``, ``accelerators`` as
``{NAME: count}``, and the location as ``infra: cloud[/region[/zone]]``.

Choices are normalised too: a set of accelerators (``{A100:1, L4:1}``) becomes ``any_of`` and a
list (``[A100, L4]``) becomes ``ordered``, and every ``any_of``/``ordered`` item is stored with the
outer fields already merged in, so each item is a complete request on its own (and stays so after
a JSON round trip, where "which fields were set" is lost).
"""

from __future__ import annotations

import math
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from skyhop.providers.base import AcceleratorArgs, DiskTier, NetworkTier
from skyhop.providers.catalog.tpus import MULTI_HOST_REFUSAL, canonical_tpu, is_multi_host
from skyhop.providers.registry import all_provider_names, canonical_name, region_is_path
from skyhop.spec.limits import MAX_ALTERNATIVES, MAX_IMAGE_CHARS, MAX_LABEL_CHARS, MAX_LABELS
from skyhop.spec.quantity import Quantity, parse_disk_size, parse_memory, parse_quantity

__all__ = [
    "DOCKER_PREFIX",
    "Autostop",
    "JobRecovery",
    "KNOWN_INFRA",
    "Resources",
    "parse_accelerator_choices",
    "parse_accelerators",
]

_K8S_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
"""A Kubernetes object name (a DNS subdomain), as a PriorityClass is named."""

KNOWN_INFRA = tuple(all_provider_names())
"""Infrastructure names ``infra``/``cloud`` accept: the providers this installation has."""

DOCKER_PREFIX = "docker:"
"""How ``image_id`` names a container image rather than a machine image (SkyPilot's form)."""

_ACCELERATOR = re.compile(r"([A-Za-z][A-Za-z0-9_.\-]*)(?::(\d+(?:\.\d+)?|\.\d+))?")


def parse_accelerators(raw: object) -> dict[str, float]:
    """Parse ``"A100:8"``, ``"A100"`` (one) or ``{A100: 8}`` into ``{"A100": 8.0}``.

    Names are upper-cased so ``a100-80gb`` and ``A100-80GB`` are the same accelerator.
    """
    if isinstance(raw, str):
        match = _ACCELERATOR.fullmatch(raw.strip())
        if not match:
            raise ValueError(f"accelerators must look like 'A100' or 'A100:8', got {raw!r}")
        return {match.group(1).upper(): float(match.group(2) or 1)}
    if isinstance(raw, dict) and len(raw) == 1:
        ((name, count),) = raw.items()
        parsed = parse_accelerators(str(name))
        if count is None:
            return parsed
        if isinstance(count, bool) or not isinstance(count, int | float) or count <= 0:
            raise ValueError(f"accelerator count for {name!r} must be a positive number, got {count!r}")
        return {next(iter(parsed)): float(count)}
    raise ValueError(f"accelerators must be 'NAME', 'NAME:COUNT' or {{NAME: COUNT}}, got {raw!r}")


def parse_accelerator_choices(raw: object) -> tuple[list[dict[str, float]], bool]:
    """Parse any accelerators form into its choices and whether their order is the user's preference.

    ``"A100:8"`` and ``{A100: 8}`` are one choice; a mapping with several keys (YAML's
    ``{A100:1, L4:1}``) is a set, any of which will do; a list is an ordered preference.
    """
    if isinstance(raw, list):
        if not raw:
            raise ValueError("accelerators list must not be empty")
        return [parse_accelerators(item) for item in raw], True
    if isinstance(raw, dict) and len(raw) > 1:
        return [parse_accelerators({name: count}) for name, count in raw.items()], False
    return [parse_accelerators(raw)], False


def _split_infra(infra: str) -> list[str]:
    parts = infra.strip().split("/")
    cloud = canonical_name(parts[0])
    allowed = ", ".join(KNOWN_INFRA)
    if cloud not in KNOWN_INFRA and cloud != "*":
        from skyhop.spec.errors import did_you_mean

        raise ValueError(f"unknown infra {parts[0]!r}{did_you_mean(cloud, KNOWN_INFRA)}; allowed: {allowed}")
    if region_is_path(cloud):
        return [cloud, "/".join(parts[1:])] if len(parts) > 1 else [cloud]
    if len(parts) > 3 or any(not p for p in parts):
        raise ValueError(f"infra must be 'cloud[/region[/zone]]', got {infra!r}")
    return [cloud, *parts[1:]]


_LOCATION_KEYS = ("infra", "cloud", "region", "zone")
_TPU_NAME = re.compile(r"[a-z]([-a-z0-9]{0,48}[a-z0-9])?")
"""A Cloud TPU node name, with room for the ``-<rank>`` of later nodes."""
_NOT_WITH_TPU = {
    "image_id": "a TPU VM boots its runtime; give accelerator_args.runtime_version instead",
    "disk_size": "a TPU VM's boot disk is its runtime's own size; use file_mounts or a bucket for data",
    "disk_tier": "a TPU VM's boot disk is its runtime's own; leave disk_tier out",
    "network_tier": "a TPU VM has the slice's own networking; leave network_tier out",
}
"""Resources fields a TPU VM cannot honour, and what to do instead."""


def _merge(outer: dict[str, Any], item: object) -> object:
    """An ``any_of``/``ordered`` item with the outer fields as defaults (SkyPilot's override rule)."""
    if not isinstance(item, dict):
        return item
    base = {k: v for k, v in outer.items() if k not in ("any_of", "ordered")}
    if any(k in item for k in _LOCATION_KEYS):
        cloud = _outer_cloud(base)
        base = {k: v for k, v in base.items() if k not in _LOCATION_KEYS}
        if cloud and not ({"infra", "cloud"} & item.keys()):
            base["cloud"] = cloud  # an item naming only a region or zone stays on the outer cloud
    return {**base, **item}


def _outer_cloud(outer: dict[str, Any]) -> str | None:
    if isinstance(outer.get("cloud"), str):
        return str(outer["cloud"])
    infra = outer.get("infra")
    return infra.split("/")[0] if isinstance(infra, str) and infra.split("/")[0] != "*" else None


def _check_alternatives(data: dict[str, Any]) -> None:
    """Refuse more than ``MAX_ALTERNATIVES`` requests before any are built (sets multiply ``any_of``)."""

    def choices(item: object) -> int:
        accelerators = item.get("accelerators") if isinstance(item, dict) else None
        return len(accelerators) if isinstance(accelerators, list | dict) and accelerators else 1

    items = [item for key in ("any_of", "ordered") if isinstance(data.get(key), list) for item in data[key]]
    count = choices(data) * (sum(choices(item) for item in items) if items else 1)
    if count > MAX_ALTERNATIVES:
        raise ValueError(
            f"any_of/ordered and accelerator choices make {count} alternatives; at most {MAX_ALTERNATIVES}"
        )


def _expand_choices(item: object) -> list[object]:
    """One item per accelerator choice, so an item never holds a set or list of them."""
    if not isinstance(item, dict) or "accelerators" not in item:
        return [item]
    try:
        choices, _ = parse_accelerator_choices(item["accelerators"])
    except ValueError:
        return [item]  # the item's own validation reports it, with its field path
    return [{**item, "accelerators": choice} for choice in choices] if len(choices) > 1 else [item]


def _without_tpu_args(item: object) -> object:
    """An alternative that asks for no TPU without the outer ``accelerator_args``, which are TPU
    options: ``{tpu-v2-8: 1, A100: 1}`` with them gives them to the TPU's alternative only."""
    if not isinstance(item, dict) or "accelerator_args" not in item:
        return item
    try:
        names = parse_accelerators(item["accelerators"]) if item.get("accelerators") is not None else {}
    except ValueError:
        return item  # the item's own validation reports it, with its field path
    return (
        item
        if any(canonical_tpu(name) for name in names)
        else {k: v for k, v in item.items() if k != "accelerator_args"}
    )


_ALIASES = {"gpus": "accelerators", "ephemeral_storage": "disk_size", "spot_recovery": "job_recovery"}
"""SkyPilot's other names for a field (``ephemeral_storage`` and ``spot_recovery`` are its deprecated
``disk_size`` and ``job_recovery``)."""
_NO_EFFECT = ("_no_missing_accel_warnings",)
"""Fields SkyPilot reads only to silence its own warnings: nothing to do, so they are dropped."""


def _aliased(data: object) -> object:
    """``data`` with SkyPilot's aliases under their canonical names (both given: refused)."""
    if not isinstance(data, dict):
        return data
    data = {k: v for k, v in data.items() if k not in _NO_EFFECT}
    for alias, canonical in _ALIASES.items():
        if alias in data:
            if data.get(canonical) is not None:
                raise ValueError(f"'{alias}' is another name for '{canonical}': give one of them")
            data[canonical] = data.pop(alias)
    return data


_DURATION = re.compile(r"(\d+)\s*([mhdw]?)")
_MINUTES_PER = {"": 1, "m": 1, "h": 60, "d": 60 * 24, "w": 60 * 24 * 7}


class Autostop(BaseModel):
    """SkyPilot's ``resources.autostop``, in its canonical form."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    idle_minutes: int = Field(default=5, ge=0, strict=True)
    down: bool = Field(default=False, strict=True)
    """Tear the cluster down instead of stopping it."""

    @model_validator(mode="before")
    @classmethod
    def _short_forms(cls, data: Any) -> Any:
        if data is True:
            return {}
        if isinstance(data, int) and not isinstance(data, bool):
            return {"idle_minutes": data}
        if isinstance(data, str):
            match = _DURATION.fullmatch(data.strip().lower())
            if not match:
                raise ValueError(f"autostop must be true, minutes, or like '30m', '10h', '2d', got {data!r}")
            return {"idle_minutes": int(match.group(1)) * _MINUTES_PER[match.group(2)]}
        if isinstance(data, dict):
            data = dict(data)
            wait_for = data.pop("wait_for", "jobs")
            if str(wait_for).lower() != "jobs":
                raise ValueError(
                    f"wait_for {wait_for!r}: skyhop's autostop counts only jobs as activity (wait_for: jobs)"
                )
            if "hook" in data or "hook_timeout" in data:
                raise ValueError("autostop hooks are not supported; end 'run' with the cleanup instead")
        return data


_NO_DYNAMIC_NODE_SET = (
    "strategy DYNAMIC_NODE_SET (a node set that replaces lost nodes under the running job, down to "
    "min_nodes) is not supported yet: skyhop recovers a managed job by relaunching its whole cluster; "
    "use EAGER_NEXT_REGION or FAILOVER"
)


class JobRecovery(BaseModel):
    """SkyPilot's ``resources.job_recovery``: how a managed job recovers (a strategy name, or this)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    strategy: Literal["EAGER_NEXT_REGION", "FAILOVER"] = "EAGER_NEXT_REGION"
    """After a preemption: ``EAGER_NEXT_REGION`` relaunches with the preempted region blocked
    (unless the task pins one); ``FAILOVER`` tries the same region first."""
    max_restarts_on_errors: int = Field(default=0, ge=0, strict=True)
    """How many times a job that failed on nodes that are still up is restarted."""
    recover_on_exit_codes: list[int] = []
    """Exit codes that are recovered like a preemption, without counting as a restart."""

    @model_validator(mode="before")
    @classmethod
    def _short_form(cls, data: Any) -> Any:
        if isinstance(data, str):
            data = {"strategy": data}
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if isinstance(data.get("strategy"), str):
            data["strategy"] = data["strategy"].upper()
            if data["strategy"] == "DYNAMIC_NODE_SET":
                raise ValueError(_NO_DYNAMIC_NODE_SET)
        if isinstance(data.get("recover_on_exit_codes"), int):
            data["recover_on_exit_codes"] = [data["recover_on_exit_codes"]]
        return data


class Resources(BaseModel):
    """Per-node requirements and placement constraints of a task."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    infra: str | None = None
    """``cloud[/region[/zone]]`` or ``ssh/<pool>``; ``*`` is any. Default: anywhere."""
    instance_type: str | None = None
    cpus: str | None = None
    """vCPUs per node: ``"4"`` exactly or ``"4+"`` at least. Default: any."""
    memory: str | None = None
    """GiB per node: ``"16"``, ``"16+"``, or ``"x4"`` (at least 4 GiB per vCPU). Default: any."""
    accelerators: dict[str, float] | None = None
    """``{NAME: count}`` per node. Default: none. A TPU slice is one accelerator: ``{TPU-V2-8: 1}``."""
    accelerator_args: AcceleratorArgs | None = None
    """SkyPilot's TPU options (``runtime_version``, ``tpu_name``); alternatives without a TPU ignore them."""
    use_spot: bool = Field(default=False, strict=True)
    disk_size: int | None = Field(default=None, gt=0, strict=True)
    """GiB of the boot disk: a number of GB, or a size like ``1024GB``/``1T``."""
    disk_tier: DiskTier | None = None
    """The boot disk's speed (``low``, ``medium``, ``high``, ``ultra``, ``best``); the provider
    maps it to a disk type. Default: the provider's default disk."""
    network_tier: NetworkTier | None = None
    """``standard`` (the default networking) or ``best`` (the fastest the instance type offers)."""
    labels: dict[str, str] = {}
    """Key-value labels put on every node (AWS and Azure tags, GCP labels)."""
    priority_class: str | None = None
    """The Kubernetes PriorityClass of the pods (``priorityClassName``): which pods the cluster's
    scheduler preempts first. Only Kubernetes has it, so it pins the task there."""
    max_hourly_cost: float | None = Field(default=None, gt=0)
    """Most $/hour one node may cost; dearer offerings are no candidates."""
    ports: list[str] | None = None
    image_id: str | dict[str, str] | None = None
    """An image for every region, or ``{region: image}``, which also limits the task to those regions."""
    docker_image: str | None = None
    """The container setup and run execute in on each node (YAML: ``image_id: docker:IMAGE``); the
    node boots the provider's default image. Never a machine image: providers do not see it."""
    autostop: Autostop | None = None
    """Stop (or tear down) the cluster after this long idle: ``true`` (5 min), minutes, ``"10h"``,
    or ``{idle_minutes, down}``. Default: never."""
    job_recovery: JobRecovery | None = None
    """How a managed job recovers from preemptions and failures. Default: ``EAGER_NEXT_REGION``,
    no restarts on errors."""
    any_of: list[Resources] | None = None
    """Alternatives, each complete (outer fields merged in); the cheapest feasible one wins."""
    ordered: list[Resources] | None = None
    """Alternatives, each complete, in the user's preference: the first feasible one wins."""

    @model_validator(mode="before")
    @classmethod
    def _normalise_choices(cls, data: Any) -> Any:
        """Turn accelerator sets/lists into ``any_of``/``ordered`` and merge outer fields into items."""
        if not isinstance(data, dict):
            return data
        data = dict(_aliased(data))  # type: ignore[call-overload]
        for key in ("any_of", "ordered"):
            if isinstance(data.get(key), list):
                data[key] = [_aliased(item) for item in data[key]]
        if data.get("any_of") is not None and data.get("ordered") is not None:
            raise ValueError("use either 'any_of' or 'ordered', not both")
        _check_alternatives(data)
        choices: list[dict[str, float]] = []
        in_order = False
        if data.get("accelerators") is not None:
            try:
                choices, in_order = parse_accelerator_choices(data["accelerators"])
            except ValueError:
                return data  # the field validator reports it, with its field path
        if len(choices) == 1:
            data["accelerators"] = choices[0]
        elif len(choices) > 1:
            if in_order and (data.get("any_of") is not None or data.get("ordered") is not None):
                raise ValueError("a list of accelerators is already an order; drop 'any_of'/'ordered'")
            if data.get("ordered") is not None:
                raise ValueError("a set of accelerators cannot be combined with 'ordered'")
            data.pop("accelerators")
            if data.get("any_of") is None:
                key = "ordered" if in_order else "any_of"
                data[key] = [{"accelerators": choice} for choice in choices]
            else:
                data["any_of"] = [
                    item
                    if not isinstance(item, dict) or "accelerators" in item
                    else {**item, "accelerators": c}
                    for item in data["any_of"]
                    for c in choices
                ]
        for key in ("any_of", "ordered"):
            items = data.get(key)
            if isinstance(items, list):
                if not items:
                    raise ValueError(f"'{key}' must list at least one alternative")
                parts = [part for item in items for part in _expand_choices(_merge(data, item))]
                data[key] = [_without_tpu_args(part) for part in parts]
        return data

    @model_validator(mode="before")
    @classmethod
    def _fold_legacy_location(cls, data: Any) -> Any:
        """Accept SkyPilot's legacy ``cloud``/``region``/``zone`` keys as ``infra``."""
        if not isinstance(data, dict) or not ({"cloud", "region", "zone"} & data.keys()):
            return data
        data = dict(data)
        if data.get("infra") is not None:
            raise ValueError("use either 'infra' or the legacy 'cloud'/'region'/'zone', not both")
        cloud = data.pop("cloud", None) or "*"
        region = data.pop("region", None)
        zone = data.pop("zone", None)
        region = region or ("*" if zone else None)  # a zone alone names its region (SkyPilot infers it)
        data["infra"] = "/".join(str(p) for p in (cloud, region, zone) if p)
        return data

    @model_validator(mode="after")
    def _check_nesting(self) -> Resources:
        for item in (self.any_of or []) + (self.ordered or []):
            if item.any_of or item.ordered:
                raise ValueError("'any_of'/'ordered' items cannot contain 'any_of' or 'ordered' themselves")
        if len({alt.docker_image for alt in self.alternatives}) > 1:
            raise ValueError(
                "every any_of/ordered alternative must run in the same container (image_id: docker:IMAGE)"
            )
        return self

    @field_validator("infra")
    @classmethod
    def _check_infra(cls, value: str | None) -> str | None:
        if value is None:
            return None
        canonical = "/".join(_split_infra(value))
        return None if canonical == "*" else canonical

    @field_validator("cpus", mode="before")
    @classmethod
    def _check_cpus(cls, value: object) -> str | None:
        return None if value is None else str(parse_quantity(value, "cpus"))

    @field_validator("memory", mode="before")
    @classmethod
    def _check_memory(cls, value: object) -> str | None:
        return None if value is None else str(parse_memory(value))

    @field_validator("accelerators", mode="before")
    @classmethod
    def _check_accelerators(cls, value: object) -> dict[str, float] | None:
        if value is None:
            return None
        ((name, count),) = parse_accelerators(value).items()
        tpu = canonical_tpu(name)
        if tpu is None:
            return {name: count}
        if is_multi_host(tpu):
            raise ValueError(f"{tpu} {MULTI_HOST_REFUSAL}")
        if count != 1:
            raise ValueError(
                f"{tpu}:{count:g}: a TPU slice counts once; ask for a bigger slice or more nodes"
            )
        return {tpu.upper(): 1.0}

    @field_validator("accelerator_args", mode="before")
    @classmethod
    def _check_accelerator_args(cls, value: object) -> object:
        """SkyPilot's switches that ask for what skyhop does not do are refused; the rest is kept."""
        if not isinstance(value, dict):
            return value
        from skyhop.spec.refused import NO_QUEUED_RESOURCES, NO_TPU_NODES

        args = dict(value)
        for switch, refusal in (("tpu_vm", NO_TPU_NODES), ("gcp_queued_resource", NO_QUEUED_RESOURCES)):
            on = args.pop(switch, switch == "tpu_vm")
            if not isinstance(on, bool):
                raise ValueError(f"{switch} must be true or false, got {on!r}")
            if on != (switch == "tpu_vm"):
                raise ValueError(f"{switch}: {str(on).lower()}: {refusal}")
        name = args.get("tpu_name")
        if name is not None and not (isinstance(name, str) and _TPU_NAME.fullmatch(name)):
            raise ValueError(
                f"tpu_name {name!r} must be 1-50 lowercase letters, digits or '-', starting with a letter"
            )
        return args

    @model_validator(mode="after")
    def _check_tpu_fields(self) -> Resources:
        """A TPU VM boots its runtime on its own disk: fields that would change either are refused."""
        tpus = [alt for alt in self.alternatives if alt.tpu is not None]
        if self.accelerator_args is not None and not tpus:
            raise ValueError(
                "accelerator_args are TPU options; ask for a TPU (accelerators: tpu-v2-8) or drop them"
            )
        for alt in tpus:
            for field, hint in _NOT_WITH_TPU.items():
                if getattr(alt, field) is not None:
                    raise ValueError(f"{field} with {alt.tpu}: {hint}")
        return self

    @model_validator(mode="before")
    @classmethod
    def _docker_image(cls, data: Any) -> Any:
        """``image_id: docker:IMAGE`` is a container to run in, not a machine image: its own field."""
        if not isinstance(data, dict):
            return data
        image = data.get("image_id")
        images = list(image.values()) if isinstance(image, dict) else [image]
        if not any(isinstance(i, str) and i.startswith(DOCKER_PREFIX) for i in images):
            return data
        if not isinstance(image, str):
            raise ValueError(
                "image_id: a container image is the same in every region; give image_id: docker:IMAGE"
            )
        if data.get("docker_image") is not None:
            raise ValueError("give the container once, as image_id: docker:IMAGE")
        name = image.removeprefix(DOCKER_PREFIX).strip()
        if not name or any(c.isspace() for c in name) or len(name) > MAX_IMAGE_CHARS:
            raise ValueError(
                f"image_id: {image[:80]!r} must be docker:IMAGE, an image reference of at most "
                f"{MAX_IMAGE_CHARS} characters without spaces (like docker:ubuntu:22.04)"
            )
        return {**data, "image_id": None, "docker_image": name}

    @field_validator("image_id", mode="before")
    @classmethod
    def _check_image_id(cls, value: object) -> object:
        if value is None or (isinstance(value, str) and value):
            return value
        if isinstance(value, dict) and value and all(isinstance(v, str) and v for v in value.values()):
            return {str(region): image for region, image in value.items()}
        raise ValueError(f"image_id must be an image name or {{region: image name}}, got {value!r}")

    @field_validator("disk_size", mode="before")
    @classmethod
    def _disk_size_units(cls, value: object) -> object:
        return value if value is None or isinstance(value, bool | int) else parse_disk_size(value)

    @field_validator("priority_class")
    @classmethod
    def _check_priority_class(cls, value: str | None) -> str | None:
        if value is not None and not _K8S_NAME.match(value):
            raise ValueError(
                f"a Kubernetes PriorityClass name: at most 253 lowercase letters, digits, '-' and '.', "
                f"starting and ending with a letter or digit, got {value!r}"
            )
        return value

    @field_validator("labels", mode="before")
    @classmethod
    def _check_labels(cls, value: object) -> object:
        if value is None:
            return {}
        if not isinstance(value, dict):
            return value
        if len(value) > MAX_LABELS:
            raise ValueError(f"{len(value)} labels; at most {MAX_LABELS}")
        for key, item in value.items():
            if not isinstance(key, str) or not key or len(key) > MAX_LABEL_CHARS:
                raise ValueError(f"label key {str(key)[:80]!r} must be 1-{MAX_LABEL_CHARS} characters")
            if isinstance(item, dict | list) or item is None or len(str(item)) > MAX_LABEL_CHARS:
                raise ValueError(f"label {key!r} must be a string of at most {MAX_LABEL_CHARS} characters")
        return {key: str(item) for key, item in value.items()}

    @field_validator("autostop", mode="before")
    @classmethod
    def _autostop_off(cls, value: object) -> object:
        return None if value is False else value

    @field_validator("ports", mode="before")
    @classmethod
    def _check_ports(cls, value: object) -> list[str] | None:
        if value is None:
            return None
        items = value if isinstance(value, list) else [value]
        ports = []
        for item in items:
            text = str(item).strip()
            bounds = text.split("-")
            if not all(b.isdigit() and 0 < int(b) < 65536 for b in bounds) or len(bounds) > 2:
                raise ValueError(f"ports must be numbers 1-65535 or ranges like '8000-8010', got {item!r}")
            ports.append(text)
        return ports

    @property
    def alternatives(self) -> list[Resources]:
        """The complete requests this one stands for: its ``any_of``/``ordered`` items, or itself."""
        return list(self.any_of or self.ordered or [self])

    def image_for(self, region: str | None) -> str | None:
        """The image to boot in ``region`` (None: the provider's default)."""
        if isinstance(self.image_id, dict):
            return self.image_id.get(region or "")
        return self.image_id

    def allows_region(self, region: str | None) -> bool:
        """False where a per-region ``image_id`` has no image for ``region``."""
        return not isinstance(self.image_id, dict) or (region or "") in self.image_id

    @property
    def tpu(self) -> str | None:
        """The TPU slice this request asks for (``tpu-v2-8``), or None."""
        return next((canonical_tpu(name) for name in self.accelerators or {} if canonical_tpu(name)), None)

    @property
    def cloud(self) -> str | None:
        """The pinned infrastructure, or None for anywhere."""
        part = self._infra_parts(0)
        return None if part in (None, "*") else part

    @property
    def region(self) -> str | None:
        """The pinned region (or SSH pool / Kubernetes context), or None."""
        return self._infra_parts(1)

    @property
    def zone(self) -> str | None:
        """The pinned zone, or None."""
        return self._infra_parts(2)

    def _infra_parts(self, index: int) -> str | None:
        if self.infra is None:
            return None
        parts = _split_infra(self.infra)
        return parts[index] if index < len(parts) and parts[index] != "*" else None

    @property
    def node_accelerators(self) -> dict[str, float] | None:
        """The accelerators a node must have. A fraction (``V100:0.5``, ``1.5``) is the whole GPUs
        holding it: the node is planned with those, and the job queue gives the job its share, so
        two ``V100:0.5`` jobs run at once on one V100."""
        if self.accelerators is None:
            return None
        return {name: float(math.ceil(count - 0.01)) for name, count in self.accelerators.items()}

    @property
    def cpu_quantity(self) -> Quantity | None:
        """``cpus`` parsed, or None when any count will do."""
        return None if self.cpus is None else parse_quantity(self.cpus, "cpus")

    @property
    def memory_quantity(self) -> Quantity | None:
        """``memory`` parsed, or None when any amount will do."""
        return None if self.memory is None else parse_memory(self.memory)

    def describe(self) -> str:
        """Short human form such as ``4+ CPU, 16+ GB, A100:8`` (alternatives joined by `` | ``)."""
        if self.any_of or self.ordered:
            joiner = " | " if self.any_of else " > "
            return joiner.join(f"[{item.describe()}]" for item in self.alternatives)
        parts = []
        if self.cpus:
            parts.append(f"{self.cpus} CPU")
        if self.memory:
            parts.append(f"{self.memory} GB")
        for name, count in (self.accelerators or {}).items():
            parts.append(f"{name}:{count:g}")
        if self.instance_type:
            parts.append(self.instance_type)
        return ", ".join(parts) or "any"
