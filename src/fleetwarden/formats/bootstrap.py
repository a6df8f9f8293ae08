"""Node labels, taints and max-pods set at boot: kubelet flags, nodeadm NodeConfig, Bottlerocket.

Provisioners let users pass what the kubelet registers in text fields fleetwarden would
otherwise drop without a trace:

- kubelet flags (AL2 ``bootstrap.sh --kubelet-extra-args '--node-labels=a=b,c=d
  --register-with-taints=k=v:NoSchedule --max-pods=58'``, eksctl ``overrideBootstrapCommand``,
  terraform-aws-eks ``bootstrap_extra_args``, kubeadm ``kubeletExtraArgs``);
- nodeadm ``NodeConfig`` documents (AL2023: ``spec.kubelet.flags``, ``spec.kubelet.config``
  ``registerWithTaints`` / ``maxPods``), alone or inside a MIME multi-part user data;
- Bottlerocket TOML (``[settings.kubernetes.node-labels]``, ``[settings.kubernetes.node-taints]``
  with ``"key" = "value:Effect"`` or a list of them, ``settings.kubernetes.max-pods``).

Only literal values are taken; a value holding a shell or template variable (``${NODE_LABELS}``,
``$LABELS``) is returned as unresolved, never guessed. Pure: text in, ``BootFacts`` out.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from fleetwarden.core.integers import ascii_int
from fleetwarden.core.pools import Taint, normalise_effect

__all__ = [
    "BootFacts",
    "from_bottlerocket_toml",
    "from_kubelet_flags",
    "from_nodeadm",
    "from_user_data",
    "kubelet_config",
]

_VARIABLE = re.compile(r"\$\{?[A-Za-z_]|\{\{")
_FLAG = re.compile(r"--(node-labels|register-with-taints|max-pods)(?:=|\s+)(\S+)")
_BOUNDARY = re.compile(r"^--[^\s-][^\s]*\s*$", re.M)


@dataclass(slots=True)
class BootFacts:
    """What the kubelet will register, as far as literal text says."""

    labels: dict[str, str] = field(default_factory=dict)
    taints: list[Taint] = field(default_factory=list)
    max_pods: int | None = None
    unresolved: list[str] = field(default_factory=list)  # texts holding variables
    found: bool = False  # the text sets labels, taints or max-pods at all

    def merge(self, other: BootFacts) -> None:
        self.labels.update(other.labels)
        self.taints.extend(t for t in other.taints if t not in self.taints)
        if other.max_pods is not None:
            self.max_pods = other.max_pods
        self.unresolved.extend(other.unresolved)
        self.found = self.found or other.found


def _taint_text(text: str) -> Taint | None:
    """``key=value:Effect`` / ``key:Effect``; None when it is not a taint."""
    body, sep, effect = text.strip().rpartition(":")
    if not sep or not body:
        return None
    key, _, value = body.partition("=")
    try:
        return Taint(key, value or None, normalise_effect(effect)) if key else None
    except ValueError:
        return None


def from_kubelet_flags(text: str) -> BootFacts:
    """``--node-labels=``, ``--register-with-taints=`` and ``--max-pods=`` anywhere in a
    command line or shell script (quotes and ``--kubelet-extra-args '...'`` nesting allowed)."""
    out = BootFacts()
    for token in _tokens(text):
        for match in _FLAG.finditer(token):
            flag, value = match[1], match[2].strip("'\"")
            out.found = True
            if _VARIABLE.search(value):
                out.unresolved.append(f"--{flag}={value}")
                continue
            _apply_flag(out, flag, value)
    return out


def _tokens(text: str) -> list[str]:
    try:
        tokens = shlex.split(text, comments=False, posix=True)
    except ValueError:  # unbalanced quotes in a script fragment
        return text.split()
    # '--kubelet-extra-args "--node-labels=a=b --max-pods=20"' nests flags in one token
    return [part for token in tokens for part in (token.split() if " " in token else [token])]


def _apply_flag(out: BootFacts, flag: str, value: str) -> None:
    if flag == "node-labels":
        for item in value.split(","):
            key, sep, label_value = item.strip().partition("=")
            if key and sep:
                out.labels[key] = label_value
    elif flag == "register-with-taints":
        for item in value.split(","):
            taint = _taint_text(item)
            if taint is not None and taint not in out.taints:
                out.taints.append(taint)
    elif (max_pods := ascii_int(value)) is not None:
        out.max_pods = max_pods


def from_nodeadm(text: str) -> BootFacts:
    """Every nodeadm ``NodeConfig`` in a text (plain YAML or MIME parts)."""
    out = BootFacts()
    for config in _node_configs(text):
        spec = config.get("spec")
        kubelet = spec.get("kubelet") if isinstance(spec, Mapping) else None
        if not isinstance(kubelet, Mapping):
            continue
        flags = kubelet.get("flags")
        if isinstance(flags, list):
            out.merge(from_kubelet_flags(" ".join(str(f) for f in flags)))
        config_ = kubelet.get("config")
        if isinstance(config_, Mapping):
            kubelet_config(out, config_)
    return out


def kubelet_config(out: BootFacts, config: Mapping[str, Any]) -> None:
    """A KubeletConfiguration fragment: ``registerWithTaints`` and ``maxPods``."""
    taints = config.get("registerWithTaints")
    if isinstance(taints, list):
        out.found = True
        for item in taints:
            if not isinstance(item, Mapping) or not isinstance(item.get("key"), str):
                continue
            try:
                effect = normalise_effect(str(item.get("effect", "")))
            except ValueError:
                continue
            value = item.get("value")
            taint = Taint(item["key"], None if value in (None, "") else str(value), effect)
            if taint not in out.taints:
                out.taints.append(taint)
    pods = config.get("maxPods")
    if isinstance(pods, int) and not isinstance(pods, bool):
        out.found = True
        out.max_pods = pods


def _node_configs(text: str) -> Iterable[Mapping[str, Any]]:
    for part in _BOUNDARY.split(text):
        body = _without_mime_headers(part)
        if "NodeConfig" not in body:
            continue
        try:
            docs = list(yaml.safe_load_all(body))
        except (yaml.YAMLError, ValueError, TypeError, RecursionError):
            continue
        for doc in docs:
            if isinstance(doc, Mapping) and doc.get("kind") == "NodeConfig":
                yield doc


def _without_mime_headers(part: str) -> str:
    lines = part.strip("\n").splitlines()
    if lines and re.match(r"^(Content-|MIME-Version)", lines[0], re.I):
        while lines and lines[0].strip():
            lines.pop(0)
    return "\n".join(lines)


def from_bottlerocket_toml(text: str) -> BootFacts:
    """Bottlerocket settings TOML: node labels, node taints and max-pods."""
    out = BootFacts()
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError, RecursionError):  # deep nesting included
        return out
    settings = data.get("settings")
    kube = settings.get("kubernetes") if isinstance(settings, Mapping) else None
    if not isinstance(kube, Mapping):
        return out
    labels = kube.get("node-labels")
    if isinstance(labels, Mapping):
        out.found = True
        for key, value in labels.items():
            if _VARIABLE.search(str(value)):
                out.unresolved.append(f"node-labels.{key} = {value}")
            else:
                out.labels[str(key)] = str(value)
    taints = kube.get("node-taints")
    if isinstance(taints, Mapping):
        out.found = True
        for key, value in taints.items():
            for one in value if isinstance(value, list) else [value]:
                taint = _taint_text(f"{key}={one}")
                if taint is not None and taint not in out.taints:
                    out.taints.append(taint)
    pods = kube.get("max-pods")
    if isinstance(pods, int) and not isinstance(pods, bool):
        out.found = True
        out.max_pods = pods
    return out


def from_user_data(text: str) -> BootFacts:
    """Any of the three forms, whichever the text holds."""
    out = BootFacts()
    if "[settings" in text:
        out.merge(from_bottlerocket_toml(text))
    if "NodeConfig" in text:
        out.merge(from_nodeadm(text))
    if "--node-labels" in text or "--register-with-taints" in text or "--max-pods" in text:
        flags = from_kubelet_flags(text)
        # a NodeConfig's flags were read above; do not count them twice
        if not out.found or flags.labels.keys() - out.labels.keys():
            out.merge(flags)
    return out
