"""``policy.warn`` in the serve config: read into the healer's policy (and its fingerprint),
every mistake refused as ``FILE: policy.warn[i].KEY: reason``, and the rules passed on to the
pipeline by serve's composition root."""

from __future__ import annotations

import pytest

from fleetwarden.app.serving import ServingSettings, healing_policy
from fleetwarden.formats.errors import FormatError
from fleetwarden.wiring.service import serving_settings
from fleetwarden.wiring.service_config import service_config_from

RULE = {"owner": {"kind": "HelmRelease", "name": "podinfo"}, "fields": ["spec.replicas"]}


def test_serve_passes_the_warn_rules_to_the_pipeline():
    cfg = service_config_from({"policy": {"mode": "enforce", "warn": [RULE]}}, source="svc.yaml")
    assert serving_settings(cfg).warn == cfg.warn and len(cfg.warn) == 1
    assert service_config_from({"policy": {"warn": []}}, source="svc.yaml").warn == ()


def test_the_warn_rules_reach_the_policy_and_its_fingerprint():
    cfg = service_config_from({"policy": {"mode": "enforce", "warn": [RULE]}}, source="svc.yaml")
    (rule,) = cfg.warn
    assert (rule.owner.kind, rule.owner.name, rule.fields) == (
        "HelmRelease",
        "podinfo",
        ("spec.replicas",),
    )
    policy, fingerprint = healing_policy(ServingSettings(warn=cfg.warn))
    assert policy.warn == cfg.warn
    assert fingerprint != healing_policy(ServingSettings())[1]
    assert service_config_from({}, source="svc.yaml").warn == ()


@pytest.mark.parametrize(
    ("warn", "message"),
    [
        ("spec.replicas", "svc.yaml: policy.warn: 'spec.replicas' is not of type 'array'"),
        ([{**RULE, "owner": {"kind": "Deploy"}}], "svc.yaml: policy.warn[0].owner.kind: 'Deploy'"),
        ([RULE, {"owner": RULE["owner"]}], "svc.yaml: policy.warn[1]: missing key(s) fields"),
    ],
)
def test_a_bad_warn_rule_is_refused_in_one_line_naming_the_rule(warn, message):
    with pytest.raises(FormatError) as caught:
        service_config_from({"policy": {"warn": warn}}, source="svc.yaml")
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)
