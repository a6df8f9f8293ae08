"""Kubelet flag values as the kubelet reads them: ``--node-labels``, ``--register-with-taints``,
``--max-pods``, and which labels a kubelet may set on its own Node.

A value the kubelet refuses to start with (or registers a Node with that the API server
refuses) raises ``KubeletFlagError``, saying why. Where the values are found in scripts, user
data and configuration files is ``formats.bootstrap``'s. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from fleetwarden.core.integers import go_int
from fleetwarden.core.pools import EFFECTS, Taint

__all__ = [
    "DROPPED_TAINT",
    "GO_SPACE",
    "REFUSED_LABEL",
    "KubeletFlagError",
    "check_node_labels",
    "kubelet_labels",
    "kubelet_may_set",
    "kubelet_taint",
    "kubelet_taints",
    "label_value",
    "max_pods",
    "qualified_name",
    "register_with_taints",
    "set_node_labels",
]


class KubeletFlagError(ValueError):
    """A kubelet flag value the kubelet refuses to start with (or registers a Node with that
    the API server refuses): no node of the pool joins, so the desired state is wrong. Readers
    raise it as a ``FormatError`` naming the file and the field."""


# Flag values as the kubelet reads them, from Kubernetes' source:
# component-base cli/flag/map_string_string.go (MapStringString.Set: split on ",", skip empty
# items, key and value TrimSpace'd; repeated flags accumulate), pkg/util/flag/flags.go
# (RegisterWithTaintsVar.Set: a repeated flag replaces the taints; "" clears them) with
# pkg/util/taints/taints.go (ParseTaints / parseTaint: nothing trimmed, exactly one ":" before
# an exact effect, at most one "=", a trailing "-" marks a taint to remove, which the flag
# drops; a repeated key:effect is refused), cmd/kubelet/app/options/options.go
# (ValidateKubeletFlags on the final labels; --max-pods is an Int32Var: spf13/pflag's
# strconv.ParseInt base 0), pkg/kubelet/apis/config/validation (maxPods < 0 refused) and
# apimachinery pkg/util/validation (IsQualifiedName, IsValidLabelValue).

GO_SPACE = (  # unicode.IsSpace: what strings.TrimSpace removes
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
_NAME = re.compile(r"[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?\Z")
_SUBDOMAIN = re.compile(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*\Z")
_KUBELET_LABELS = frozenset(
    {
        "kubernetes.io/hostname",
        "kubernetes.io/os",
        "kubernetes.io/arch",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/arch",
        "beta.kubernetes.io/instance-type",
        "node.kubernetes.io/instance-type",
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region",
    }
)
REFUSED_LABEL = (
    "a label in the kubernetes.io / k8s.io namespaces the kubelet may not set itself (only "
    "kubelet.kubernetes.io/*, node.kubernetes.io/* and the well-known labels; not "
    "node-role.kubernetes.io/*): it refuses to start, so no node of the pool joins"
)


def kubelet_may_set(key: str) -> bool:
    """May a kubelet put this label on its own Node (k8s ``IsKubeletLabel``, and any label
    outside the kubernetes.io / k8s.io namespaces)?"""
    namespace = key.split("/", 1)[0] if "/" in key else ""
    k8s = namespace in ("kubernetes.io", "k8s.io") or namespace.endswith(
        (".kubernetes.io", ".k8s.io")
    )
    if not k8s or key in _KUBELET_LABELS:
        return True
    return any(
        namespace == allowed or namespace.endswith("." + allowed)
        for allowed in ("kubelet.kubernetes.io", "node.kubernetes.io")
    )


def qualified_name(key: str) -> bool:
    """A label / taint key the API server accepts: ``[dns-subdomain/]name``."""
    parts = key.split("/")
    if len(parts) > 2:
        return False
    if len(parts) == 2 and not (len(parts[0]) <= 253 and _SUBDOMAIN.match(parts[0])):
        return False
    return len(parts[-1]) <= 63 and _NAME.match(parts[-1]) is not None


def label_value(value: str) -> bool:
    """A label / taint value the API server accepts (empty, or up to 63 name characters)."""
    return value == "" or (len(value) <= 63 and _NAME.match(value) is not None)


def set_node_labels(into: dict[str, str], text: str) -> None:
    """One ``--node-labels`` occurrence added to ``into`` (MapStringString.Set)."""
    for item in text.split(","):
        if not item:
            continue
        raw_key, sep, raw_value = item.partition("=")
        if not sep:
            raise KubeletFlagError(f"{item!r} is not key=value (the kubelet refuses the flag)")
        into[raw_key.strip(GO_SPACE)] = raw_value.strip(GO_SPACE)


def check_node_labels(labels: Mapping[str, str]) -> None:
    """ValidateKubeletFlags on the labels every ``--node-labels`` gave: a label the kubelet may
    not set, a malformed key or value, and it returns an error and does not start."""
    for key, value in labels.items():
        if not kubelet_may_set(key):
            raise KubeletFlagError(f"{key}: {REFUSED_LABEL}")
        if not qualified_name(key):
            raise KubeletFlagError(f"{key!r} is not a label key (the kubelet refuses to start)")
        if not label_value(value):
            raise KubeletFlagError(f"{value!r} is not a label value (the kubelet refuses to start)")


def kubelet_labels(text: str) -> list[tuple[str, str]]:
    """``--node-labels`` as the kubelet reads it: (key, value) pairs in order;
    ``KubeletFlagError``, saying why, for a value the kubelet refuses to start with."""
    labels: dict[str, str] = {}
    set_node_labels(labels, text)
    check_node_labels(labels)
    return list(labels.items())


def register_with_taints(text: str) -> tuple[list[Taint], list[str]]:
    """One ``--register-with-taints`` value: the taints it registers, and the items it drops
    (a trailing ``-``: ParseTaints reads a taint to remove, which the flag ignores)."""
    taints: list[Taint] = []
    dropped: list[str] = []
    seen: set[tuple[str, str]] = set()
    for item in text.split(",") if text else ():
        if item.endswith("-"):
            _parse_taint(item[:-1])  # still parsed: a malformed one is refused
            dropped.append(item)
            continue
        taint = kubelet_taint(item)
        if (taint.key, taint.effect) in seen:
            raise KubeletFlagError(
                f"{item!r}: a second taint with key {taint.key!r} and effect {taint.effect} "
                "(the kubelet refuses the flag)"
            )
        seen.add((taint.key, taint.effect))
        taints.append(taint)
    return taints, dropped


DROPPED_TAINT = "a trailing '-' removes a taint: the kubelet registers nothing for it"


def kubelet_taints(text: str) -> list[Taint]:
    """``--register-with-taints`` as the kubelet reads it; ``KubeletFlagError``, saying why,
    for a value the kubelet refuses (or registers a Node with that the API server refuses)."""
    return register_with_taints(text)[0]


def kubelet_taint(item: str) -> Taint:
    """One comma-separated item of ``--register-with-taints`` (see ``kubelet_taints``)."""
    key, value, effect = _parse_taint(item)
    if not effect:
        raise KubeletFlagError(f"{item!r} has no effect (the kubelet refuses the flag)")
    return Taint(key, value or None, effect)


def _parse_taint(item: str) -> tuple[str, str, str]:
    """parseTaint: ``key[=value][:Effect]`` as (key, value, effect or "")."""
    parts = item.split(":")
    if len(parts) > 2:
        raise KubeletFlagError(f"{item!r} is not key[=value]:Effect (the kubelet refuses it)")
    if len(parts) == 1 and "=" in item:
        raise KubeletFlagError(f"{item!r} has no effect (the kubelet refuses the flag)")
    body, effect = parts[0], parts[1] if len(parts) == 2 else ""
    if len(parts) == 2 and effect not in EFFECTS:
        raise KubeletFlagError(
            f"{item!r}: the effect must be one of {', '.join(EFFECTS)}, spelt exactly "
            "(the kubelet refuses it)"
        )
    pieces = body.split("=")
    if len(pieces) > 2:
        raise KubeletFlagError(f"{item!r} is not key[=value]:Effect (the kubelet refuses it)")
    key, value = pieces[0], pieces[1] if len(pieces) == 2 else ""
    if not qualified_name(key):
        if not item:
            raise KubeletFlagError("an empty item has no effect (the kubelet refuses the flag)")
        raise KubeletFlagError(f"{item!r}: {key!r} is not a taint key (the kubelet refuses it)")
    if not label_value(value):
        raise KubeletFlagError(f"{item!r}: {value!r} is not a taint value (the kubelet refuses it)")
    return key, value, effect


def max_pods(text: str) -> int:
    """``--max-pods`` as the kubelet reads it (pflag Int32Var, then its validation)."""
    pods = go_int(text, bits=32)
    if pods is None:
        raise KubeletFlagError(
            f"{text!r} is not an integer the kubelet reads (Go strconv.ParseInt, "
            "base 0: no spaces, a leading 0 is octal): it refuses to start"
        )
    if pods < 0:
        raise KubeletFlagError(f"{text!r} is negative: the kubelet refuses to start")
    return pods
