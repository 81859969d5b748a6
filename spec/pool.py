"""``Pool``: a task's ``pool:`` section (SkyPilot's pools), and the rules a pool task follows.

A pool task is not run: ``skyhop jobs pool apply -p NAME FILE`` brings up ``workers`` clusters of its
resources with its setup done, and ``skyhop jobs launch --pool NAME job.yaml`` runs managed jobs on
them. The section has SkyPilot's keys; the autoscaling ones (``min_workers``, ``max_workers``,
``queue_length_threshold``, the delays) and ``spot_placer`` are validated and then refused by name,
since skyhop keeps a fixed number of workers: none of them is silently ignored.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from skyhop.spec.limits import MAX_POOL_WORKERS

__all__ = ["POOL_APPLY_HINT", "Pool", "pool_refusal"]

POOL_APPLY_HINT = "skyhop jobs pool apply -p NAME {file}"
"""How a pool file is used, as every refusal and plan of one says it (``{file}``: the file's path)."""


class Pool(BaseModel):
    """SkyPilot's ``pool:`` keys, typed; ``workers`` is the fixed number of worker clusters."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    workers: int | None = Field(default=None, ge=0, le=MAX_POOL_WORKERS, strict=True)
    min_workers: int | None = Field(default=None, ge=0, strict=True)
    max_workers: int | None = Field(default=None, ge=0, strict=True)
    queue_length_threshold: int | None = Field(default=None, ge=1, strict=True)
    upscale_delay_seconds: float | None = Field(default=None, ge=0)
    downscale_delay_seconds: float | None = Field(default=None, ge=0)
    spot_placer: str | None = None

    @model_validator(mode="after")
    def _fixed_size(self) -> Pool:
        autoscaling = [
            key
            for key in (
                "min_workers",
                "max_workers",
                "queue_length_threshold",
                "upscale_delay_seconds",
                "downscale_delay_seconds",
            )
            if getattr(self, key) is not None
        ]
        if autoscaling:
            raise ValueError(
                f"{autoscaling[0]}: pool autoscaling is not supported yet; give a fixed workers: N "
                "(skyhop jobs pool apply -p NAME FILE again changes it)"
            )
        if self.spot_placer is not None:
            raise ValueError(
                "spot_placer: not supported yet; a pool's workers go where the optimizer places them"
            )
        if self.workers is None:
            raise ValueError("workers: required: the number of worker clusters (workers: N)")
        return self

    @property
    def size(self) -> int:
        """The number of workers (validation made sure it is given)."""
        assert self.workers is not None
        return self.workers


def pool_refusal(file: str, workers: int) -> str:
    """The one line every command that cannot run a pool file prints, pointing at ``pool apply``."""
    hint = POOL_APPLY_HINT.format(file=file)
    return f"{file} defines a pool of {workers} worker{'s' if workers != 1 else ''}: apply it with {hint}"
