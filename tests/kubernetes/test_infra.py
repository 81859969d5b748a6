"""``infra: k8s[/context]`` and the legacy ``cloud: kubernetes`` name the Kubernetes provider."""

from __future__ import annotations

import pytest

from skyhop.providers.home import skyhop_home
from skyhop.providers.kubernetes.settings import KubernetesSettings, SettingsError, load_settings
from skyhop.spec.resources import Resources


@pytest.mark.parametrize(
    ("given", "cloud", "context"),
    [
        ({"infra": "k8s"}, "kubernetes", None),
        ({"infra": "k8s/my-ctx"}, "kubernetes", "my-ctx"),
        (
            {"infra": "kubernetes/arn:aws:eks:us-east-1:1:cluster/prod"},
            "kubernetes",
            "arn:aws:eks:us-east-1:1:cluster/prod",
        ),
        ({"cloud": "kubernetes", "region": "lab"}, "kubernetes", "lab"),
    ],
)
def test_k8s_infra_names_the_provider_and_its_context(
    given: dict[str, str], cloud: str, context: str | None
) -> None:
    resources = Resources.model_validate(given)
    assert (resources.cloud, resources.region) == (cloud, context)


def test_a_bad_kubernetes_setting_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    monkeypatch.setenv("SKYHOP_HOME", str(tmp_path))
    (skyhop_home() / "config.yaml").write_text("kubernetes: {allowed_context: [a]}\n")
    with pytest.raises(SettingsError, match="kubernetes.allowed_context: Extra inputs are not permitted"):
        load_settings()
    (skyhop_home() / "config.yaml").write_text("kubernetes: {autoscaler: generic, provision_timeout: 30}\n")
    assert load_settings().unschedulable_wait_s == 30
    assert KubernetesSettings().unschedulable_wait_s == 0
