"""An existing cluster fits a request when one of the request's alternatives fits it."""

from __future__ import annotations

from skyhop.optimizer import mismatch
from skyhop.providers.base import Offering
from skyhop.spec import Resources

CLUSTER = Offering(
    provider="gcp",
    instance_type="g2-standard-4",
    cpus=4,
    memory_gib=16,
    accelerators={"L4": 1},
    region="us-east4",
    price=0.7,
)


def test_one_fitting_alternative_is_enough() -> None:
    request = Resources.model_validate({"accelerators": {"A100:1": None, "L4:1": None}})
    assert mismatch(request, 1, CLUSTER, 1) is None


def test_otherwise_every_reason_is_named_once() -> None:
    request = Resources.model_validate(
        {"ordered": [{"accelerators": "A100"}, {"accelerators": "H100", "cpus": 8}]}
    )
    message = mismatch(request, 2, CLUSTER, 1)
    assert message is not None
    assert "(more nodes, A100:1, more vCPUs, H100:1)" in message
    assert "Existing: 1x gcp g2-standard-4 (4 vCPUs, 16 GiB, L4:1)" in message
