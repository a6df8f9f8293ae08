"""The YAML config file (``--config``): scan options, severity overrides, ignore rules, limits.

Example::

    scan:
      tolerance: 0.05                 # L3: allowed deviation of allocatable
      resources: [cpu, memory, pods]
      poolLabels: [example.com/pool]  # consulted before the provider labels
      extraTransientTaints: [example.com/draining]
      includeControlPlane: false
      severities:                     # LAYER/field glob -> severity; first match wins
        "L1/labels.team": low
        "SPEC/osImage": critical
      ignore:
        - {cluster: "dev-*", field: "labels.*"}
        - {pool: "batch", layer: "L3"}
      provisioners:                   # releases whose defaults apply where files do not say
        eksctl: "0.190.0"             # the eksctl release that created the node groups
        terraform-aws-eks: 20         # major, for module blocks that pin no version
    limits:
      desiredFileBytes: 16777216
      nodesFileBytes: 2147483648
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleetwarden.core.findings import Severity
from fleetwarden.core.nodes import POOL_LABELS
from fleetwarden.core.rules import DEFAULT_TRANSIENT_TAINTS, DiffOptions, IgnoreRule, SeverityRule
from fleetwarden.formats.errors import FormatError
from fleetwarden.formats.provisioners import Assumed, parse_release

__all__ = [
    "CONFIG_SCHEMA",
    "DEFAULT_DESIRED_LIMIT",
    "DEFAULT_NODES_LIMIT",
    "Settings",
    "load_settings",
    "settings_from",
]

DEFAULT_DESIRED_LIMIT = 16 * 2**20  # desired-state files are written by people
DEFAULT_NODES_LIMIT = 2 * 2**30  # a dump of a very large cluster
_SEVERITIES = [s.value for s in Severity]
_GLOB = {"type": "string", "minLength": 1}
CONFIG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "scan": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "tolerance": {"type": "number", "minimum": 0, "maximum": 1},
                "diskTolerance": {"type": "number", "minimum": 0, "maximum": 1},
                "resources": {"type": "array", "items": {"type": "string"}},
                "poolLabels": {"type": "array", "items": {"type": "string", "minLength": 1}},
                "transientTaints": {"type": "array", "items": {"type": "string"}},
                "extraTransientTaints": {"type": "array", "items": {"type": "string"}},
                "includeControlPlane": {"type": "boolean"},
                "medianMinNodes": {"type": "integer", "minimum": 1},
                "severities": {"type": "object", "additionalProperties": {"enum": _SEVERITIES}},
                "provisioners": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "eksctl": {"type": "string", "pattern": r"^v?\d+\.\d+(\.\d+)?$"},
                        "terraform-aws-eks": {"type": "integer", "minimum": 17, "maximum": 99},
                    },
                },
                "ignore": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "minProperties": 1,
                        "properties": {
                            "cluster": _GLOB,
                            "pool": _GLOB,
                            "field": _GLOB,
                            "layer": _GLOB,
                        },
                    },
                },
            },
        },
        "limits": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "desiredFileBytes": {"type": "integer", "minimum": 1},
                "nodesFileBytes": {"type": "integer", "minimum": 1},
            },
        },
        # cluster (context) name -> its API server's audit log (--audit-log-path), JSON lines
        "auditLogs": {"type": "object", "additionalProperties": {"type": "string", "minLength": 1}},
    },
}


@dataclass(frozen=True, slots=True)
class Settings:
    diff: DiffOptions = field(default_factory=DiffOptions)
    assume: Assumed = field(default_factory=Assumed)
    desired_file_limit: int = DEFAULT_DESIRED_LIMIT
    nodes_file_limit: int = DEFAULT_NODES_LIMIT
    raw: Mapping[str, Any] = field(default_factory=dict)
    audit_logs: Mapping[str, str] = field(default_factory=dict)  # cluster -> audit log path


def load_settings(path: Path | None) -> Settings:
    if path is None:
        return Settings()
    import yaml  # loaded only with a config file: a plain ``scan`` does not pay for it

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise FormatError(str(path), f"cannot read config: {exc}") from None
    try:
        raw = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise FormatError(
            str(path),
            f"YAML syntax error: {getattr(exc, 'problem', exc)}",
            line=mark.line + 1 if mark is not None else None,
        ) from None
    if not isinstance(raw, Mapping):
        raise FormatError(str(path), "the config must be a mapping")
    return settings_from(raw, source=str(path))


def settings_from(raw: Mapping[str, Any], *, source: str = "<config>") -> Settings:
    import jsonschema

    validator = jsonschema.Draft202012Validator(CONFIG_SCHEMA)
    errors = sorted(validator.iter_errors(raw), key=lambda e: list(e.absolute_path))
    if errors:
        where = ".".join(str(p) for p in errors[0].absolute_path) or "(top level)"
        raise FormatError(source, errors[0].message, field=where)
    scan = raw.get("scan", {})
    transient = tuple(scan.get("transientTaints", DEFAULT_TRANSIENT_TAINTS)) + tuple(
        scan.get("extraTransientTaints", ())
    )
    user_labels = tuple(scan.get("poolLabels", ()))
    diff = DiffOptions(
        tolerance=scan.get("tolerance", 0.05),
        disk_tolerance=scan.get("diskTolerance", 0.15),
        resources=tuple(scan.get("resources", ("cpu", "memory", "pods"))),
        median_min_nodes=scan.get("medianMinNodes", 3),
        transient_taints=transient,
        pool_labels=(*user_labels, *POOL_LABELS) if user_labels else None,
        include_control_plane=scan.get("includeControlPlane", False),
        severities=tuple(
            SeverityRule(k, Severity(v)) for k, v in scan.get("severities", {}).items()
        ),
        ignores=tuple(IgnoreRule(**rule) for rule in scan.get("ignore", ())),
    )
    limits = raw.get("limits", {})
    provisioners = scan.get("provisioners", {})
    eksctl = provisioners.get("eksctl")
    assume = Assumed(
        eksctl=parse_release(eksctl) if eksctl else None,
        terraform_aws_eks=provisioners.get("terraform-aws-eks"),
    )
    return Settings(
        diff=diff,
        assume=assume,
        desired_file_limit=limits.get("desiredFileBytes", DEFAULT_DESIRED_LIMIT),
        nodes_file_limit=limits.get("nodesFileBytes", DEFAULT_NODES_LIMIT),
        raw=raw,
        audit_logs=dict(raw.get("auditLogs") or {}),
    )
