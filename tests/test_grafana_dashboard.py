"""deploy/grafana: every series the dashboard queries is one the service exports, with the
labels the queries group by (a renamed metric must break this test, not the dashboard)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from fleetwarden.adapters.metrics import ServiceMetrics

DASHBOARD = (
    Path(__file__).resolve().parents[1] / "deploy" / "grafana" / "fleetwarden-dashboard.json"
)


def exported() -> dict[str, set[str]]:
    """Sample name -> the label names declared for it, from the service's own metrics."""
    out: dict[str, set[str]] = {}
    for metric in vars(ServiceMetrics()).values():
        name = getattr(metric, "_name", None)  # prometheus_client's declared name
        if not isinstance(name, str):
            continue
        labels = set(getattr(metric, "_labelnames", ()))
        for suffix in ("", "_total", "_bucket", "_count", "_sum"):
            out[name + suffix] = labels
    return out


def queries() -> list[str]:
    doc = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in doc["panels"] for t in p["targets"]]


def test_every_queried_series_is_exported_with_its_labels():
    known = exported()
    exprs = queries()
    assert len(exprs) >= 8
    for expr in exprs:
        names = re.findall(r"\b(fleetwarden_[a-z0-9_]+)", expr)
        assert names, expr
        for name in names:
            assert name in known, f"{name} (in {expr!r}) is not exported"
            for group in re.findall(r"by \(([^)]*)\)", expr):
                for label in (g.strip() for g in group.split(",")):
                    if label and label != "le":
                        assert label in known[name], f"{name} has no label {label!r}"


def test_dashboard_shape():
    doc = json.loads(DASHBOARD.read_text())
    ids = [p["id"] for p in doc["panels"]]
    assert len(ids) == len(set(ids))
    assert {v["name"] for v in doc["templating"]["list"]} == {"datasource", "job"}
    for p in doc["panels"]:
        assert p["datasource"]["uid"] == "${datasource}"
        assert all('job=~"$job"' in t["expr"] for t in p["targets"])
