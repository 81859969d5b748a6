"""One task -> one plan: SkyPilot's selection rules, pins, alternatives, blocklists, tie-breaks."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import pytest

from skyhop.optimizer import Blocked, Blocklist, NoFeasibleOfferingError, optimize
from skyhop.providers.base import NodeRequest
from skyhop.spec import Task, task_from_dict
from tests.optimizer.catalogs import AWS, GCP, catalog_set


def _task(resources: Any, **fields: object) -> Task:
    return task_from_dict({"resources": resources, **fields}, Path("."))


def _where(tmp_path: Path, resources: Any, **kw: Any) -> tuple[str, str | None, str | None, str]:
    plan = optimize(_task(resources), catalog_set(tmp_path), **kw)
    c = plan.chosen
    return c.provider, c.region, c.zone, c.instance_type


def test_cpu_only_defaults_to_8_vcpus_from_the_default_families(tmp_path: Path) -> None:
    # t3 is cheaper but not a default family; m6i ties with azure's D8s_v5, and "aws" sorts first.
    assert _where(tmp_path, {}) == ("aws", "us-east-1", None, "m6i.2xlarge")
    # GCP on-demand candidates are per zone (a and b tie: "a" first), AWS/Azure per region.
    assert _where(tmp_path, {"infra": "gcp"}) == ("gcp", "us-central1", "us-central1-a", "n2-standard-8")


def test_cpus_and_memory_forms(tmp_path: Path) -> None:
    assert _where(tmp_path, {"cpus": "4+"})[3] == "Standard_D4s_v5"
    assert _where(tmp_path, {"cpus": 8, "memory": "x8", "infra": "aws"})[3] == "r6i.2xlarge"
    assert _where(tmp_path, {"memory": 16, "infra": "aws"})[3] == "m6i.xlarge"


def test_spot_keeps_the_on_demand_cheapest_type_and_takes_the_cheapest_spot_zone(tmp_path: Path) -> None:
    plan = optimize(_task({"cpus": 4, "infra": "aws", "use_spot": True}), catalog_set(tmp_path))
    assert (plan.chosen.instance_type, plan.chosen.zone, plan.use_spot) == ("m6i.xlarge", "us-east-1b", True)
    assert plan.hourly_cost == pytest.approx(0.05)


def test_accelerators_builtin_and_attached_to_a_gcp_n1_host(tmp_path: Path) -> None:
    plan = optimize(_task({"accelerators": "V100"}), catalog_set(tmp_path))
    # V100:1 -> an 8+ vCPU, 32+ GiB N1 host: n1-highmem-8 (n1-standard-8 has 30 GiB), plus the GPU.
    assert (plan.chosen.instance_type, plan.chosen.accelerators) == ("n1-highmem-8", {"V100": 1.0})
    assert plan.chosen.price == pytest.approx(0.47 + 2.48)
    assert _where(tmp_path, {"accelerators": "a10g"})[3] == "g5.xlarge"


def test_spot_accelerator_types_rank_by_spot_on_aws(tmp_path: Path) -> None:
    assert _where(tmp_path, {"accelerators": "A10G:1", "use_spot": True})[3] == "g5.2xlarge"


def test_region_and_zone_pins(tmp_path: Path) -> None:
    assert _where(tmp_path, {"infra": "gcp/europe-west4", "cpus": "8"})[1:3] == (
        "europe-west4",
        "europe-west4-a",
    )
    assert _where(tmp_path, {"infra": "gcp/us-central1/us-central1-b"})[2] == "us-central1-b"
    assert _where(tmp_path, {"cloud": "azure", "region": "westeurope"})[1] == "westeurope"
    assert _where(tmp_path, {"infra": "*/eu-west-1", "cpus": 4})[:2] == ("aws", "eu-west-1")


def test_instance_type_is_taken_as_named(tmp_path: Path) -> None:
    assert _where(tmp_path, {"instance_type": "e2-standard-8"})[3] == "e2-standard-8"
    assert _where(tmp_path, {"instance_type": "n1-standard-4", "accelerators": "T4"})[3] == "n1-standard-4"


def test_set_pools_alternatives_and_list_keeps_the_users_order(tmp_path: Path) -> None:
    assert _where(tmp_path, {"accelerators": {"T4:1": None, "L4:1": None}})[3] == "g4dn.xlarge"
    assert _where(tmp_path, {"accelerators": ["L4:1", "T4:1"]})[3] == "g2-standard-4"
    assert (
        _where(tmp_path, {"any_of": [{"infra": "azure", "accelerators": "T4"}, {"accelerators": "L4"}]})[0]
        == "azure"
    )
    ordered = {"ordered": [{"infra": "gcp", "accelerators": "H100:8"}, {"accelerators": "T4"}]}
    assert _where(tmp_path, ordered)[3] == "a3-highgpu-8g"


def test_ordered_falls_through_to_the_next_feasible_alternative(tmp_path: Path) -> None:
    ordered = {"ordered": [{"accelerators": "B200:8"}, {"infra": "azure", "accelerators": "V100"}]}
    assert _where(tmp_path, ordered)[3] == "Standard_NC6s_v3"


def test_blocklist_scopes_zone_region_cloud_and_type(tmp_path: Path) -> None:
    def blocked(cloud: str, *entries: Blocked) -> tuple[str, str | None, str | None, str]:
        return _where(tmp_path, {"infra": cloud, "cpus": 8}, blocklist=Blocklist(entries=list(entries)))

    assert blocked("gcp", Blocked(provider="gcp", zone="us-central1-a"))[2] == "us-central1-b"
    assert blocked("gcp", Blocked(provider="gcp", region="us-central1"))[1] == "europe-west4"
    # Every place of the cloud's best type blocked: its next type competes.
    assert blocked("aws", Blocked(provider="aws", instance_type="m6i.2xlarge"))[3] == "r6i.2xlarge"
    with pytest.raises(NoFeasibleOfferingError, match="blocked by failover"):
        blocked("gcp", Blocked(provider="gcp"))


def test_ties_break_by_provider_region_zone_type(tmp_path: Path) -> None:
    same = "x.large,4,16,,,,r1,r1-b,1.0,\nx.large,4,16,,,,r1,r1-a,1.0,\n"
    tied = catalog_set(
        tmp_path, gcp=same.replace("x.large", "n2-standard-4"), azure="Standard_D4s_v5,4,16,,,,r0,,1.0,\n"
    )
    plan = optimize(_task({"cpus": 4}), tied)
    assert (plan.chosen.provider, plan.chosen.region) == ("azure", "r0")
    gcp_only = optimize(_task({"cpus": 4, "infra": "gcp"}), tied)
    assert gcp_only.chosen.zone == "r1-a"


def test_minimize_time_uses_the_tasks_estimate_then_cost(tmp_path: Path) -> None:
    from skyhop.spec import DagTask

    node = DagTask(
        task=_task({"accelerators": {"T4:1": None, "H100:8": None}}), estimated_runtime={"H100": 0.1, "T4": 5}
    )
    assert optimize(node, catalog_set(tmp_path), minimize="time").chosen.instance_type == "a3-highgpu-8g"
    cheap = optimize(node, catalog_set(tmp_path), minimize="cost")
    assert cheap.chosen.instance_type == "g4dn.xlarge"
    assert cheap.considered[0].cost == pytest.approx(0.526 * 5)


def test_num_nodes_multiplies_the_hourly_cost(tmp_path: Path) -> None:
    plan = optimize(_task({"accelerators": "T4", "infra": "aws"}, num_nodes=3), catalog_set(tmp_path))
    assert plan.hourly_cost == pytest.approx(3 * 0.526)


@pytest.mark.parametrize(
    ("resources", "message"),
    [
        (
            {"accelerators": "H100:16"},
            "no offering has 16 H100 on one node; the most is 8 on aws p5.48xlarge",
        ),
        ({"accelerators": "A10"}, "did you mean A10G"),
        ({"accelerators": "H100:8", "infra": "azure"}, "no offering on azure has accelerator H100"),
        ({"cpus": "512+"}, "the largest is gcp a3-highgpu-8g with 208 vCPUs"),
        ({"infra": "gcp/us-east9"}, "gcp has no region 'us-east9'"),
    ],
)
def test_impossible_requests_say_why(tmp_path: Path, resources: dict[str, object], message: str) -> None:
    with pytest.raises(NoFeasibleOfferingError) as info:
        optimize(_task(resources), catalog_set(tmp_path))
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_local_is_a_candidate_only_when_pinned_under_a_catalog_folder(tmp_path: Path) -> None:
    assert _where(tmp_path, {"infra": "local"})[0] == "local"
    assert _where(tmp_path, {"cpus": "1+"})[0] != "local"


def test_plan_keeps_a_few_candidates_per_provider_best_first(tmp_path: Path) -> None:
    plan = optimize(_task({"cpus": 8}), catalog_set(tmp_path, aws=AWS, gcp=GCP))
    assert plan.candidates[0] == plan.chosen
    costs = [c.cost for c in plan.considered]
    assert costs == sorted(costs)
    assert {c.offering.provider for c in plan.considered} == {"aws", "gcp"}


def test_image_id_per_region_keeps_the_task_in_those_regions(tmp_path: Path) -> None:
    assert _where(tmp_path, {"infra": "aws", "cpus": 4, "image_id": {"eu-west-1": "ami-1"}})[1] == "eu-west-1"


def test_the_request_carries_the_tasks_own_node_ask_and_container_image(tmp_path: Path) -> None:
    task = _task(
        {"cpus": "2+", "memory": "x4", "accelerators": "V100:0.5", "image_id": "docker:ubuntu:24.04"}
    )
    request = optimize(task, catalog_set(tmp_path)).choice.request("c", 1, "a1")
    assert request.node_request == NodeRequest(cpus=2, memory_per_cpu=4, accelerators={"V100": 1})
    assert (request.container_image, request.image_id) == ("ubuntu:24.04", None)


@pytest.mark.parametrize(
    "resources",
    [
        {"cpus": "2+", "use_spot": True},
        {"accelerators": ["H100:8", "A100:8"]},
        {"any_of": [{"infra": "aws", "cpus": 4}, {"infra": "gcp", "cpus": 8}]},
        {"accelerators": "L4:1", "infra": "gcp"},
    ],
)
@pytest.mark.parametrize("minimize", ["cost", "time"])
def test_a_plan_built_from_the_kept_candidates_is_the_plan_of_all_of_them(
    resources: dict[str, Any], minimize: Literal["cost", "time"]
) -> None:
    """``optimize`` builds only the candidates a plan keeps; ranking every one gives the same plan."""
    from skyhop.optimizer.plan import plan_for, task_candidates
    from skyhop.providers.catalog import load_catalogs
    from skyhop.spec import DagTask

    node = DagTask(task=_task(resources, num_nodes=2))
    every = task_candidates(node, load_catalogs(), Blocklist(), minimize)
    assert len(every) > 20  # the shipped catalogs: most are left out of a plan
    whole = plan_for(node, every, every[0], minimize)
    assert optimize(node, load_catalogs(), minimize=minimize) == whole
