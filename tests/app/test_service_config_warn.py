"""``policy.warn`` in the serve config: read into the healer's policy (and its fingerprint),
and every mistake refused as ``FILE: policy.warn[i].KEY: reason``. Until serve's wiring passes
the rules on (``WARN_APPLIED_BY_SERVE``), valid rules are refused rather than ignored."""

from __future__ import annotations

import pytest

from fleetwarden.app import service_config
from fleetwarden.app.serving import ServingSettings, healing_policy
from fleetwarden.entrypoints.service_config import service_config_from
from fleetwarden.formats.errors import FormatError

RULE = {"owner": {"kind": "HelmRelease", "name": "podinfo"}, "fields": ["spec.replicas"]}


def test_valid_rules_are_refused_while_serve_does_not_apply_them():
    with pytest.raises(FormatError) as caught:
        service_config_from({"policy": {"mode": "enforce", "warn": [RULE]}}, source="svc.yaml")
    assert caught.value.field == "policy.warn" and "does not apply them" in caught.value.reason
    assert service_config_from({"policy": {"warn": []}}, source="svc.yaml").warn == ()


def test_the_warn_rules_reach_the_policy_and_its_fingerprint(monkeypatch):
    monkeypatch.setattr(service_config, "WARN_APPLIED_BY_SERVE", True)
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
