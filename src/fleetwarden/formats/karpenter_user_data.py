"""An EC2NodeClass's ``userData`` as the nodes get it beside what Karpenter writes itself.

Karpenter does not hand the user's user data to the node alone (aws/karpenter-provider-aws,
``pkg/providers/amifamily``). On AL2023 (``bootstrap/nodeadm.go``) it appends its own
NodeConfig part after the user's parts, whose ``kubelet.config.registerWithTaints`` holds the
NodeClaim's taints and startup taints (from v1, ``karpenter.sh/unregistered`` too: never empty).
nodeadm merges the parts' NodeConfigs in order, a later config value replacing an earlier one
(``internal/api/merge.go``: mergo WithOverride on the inline document, a list replaced whole),
and passes ``kubelet.flags`` on the kubelet's command line, where a flag beats the
configuration. So:

- ``registerWithTaints`` in the user's NodeConfig never reaches the kubelet: Karpenter's
  replaces it (listed as ignored); so does ``maxPods``, which Karpenter always sets (the
  class's ``kubelet.maxPods``, else the instance type's pod count: ``resolver.go``), unless a
  ``--max-pods`` flag there beats both;
- a ``--register-with-taints`` flag in the user's data (a NodeConfig's ``kubelet.flags``)
  replaces Karpenter's ``registerWithTaints``: the kubelet registers the flag's taints only.
  Karpenter before v1.5 then copies the NodeClaim's taints onto the Node at registration,
  adding those whose key and effect the Node lacks (sigs.k8s.io/karpenter ``syncNode``:
  ``Taints.Merge``); from v1.5 it labels AL2023 nodes ``karpenter.sh/do-not-sync-taints``
  (``launchtemplate.InjectDoNotSyncTaintsLabel``, not for ``Custom``) and copies none. A
  ``karpenter.sh/v1beta1`` NodePool is served up to v1.0 only, so its taints are expected
  beside the flag's; on a ``karpenter.sh/v1`` NodePool the release is not in the files, so a
  NodePool taint the flag does not cover leaves the taints unresolved, saying why. One the
  flag gives another value (same key and effect) is ignored: the Node keeps the flag's.

User data that is not a MIME message is one part to Karpenter: a NodeConfig part where it
unmarshals into a map (nodeadm then refuses one that is no NodeConfig), else a shell script.
Other families (and ``Custom``, whose user data Karpenter passes on as it is) are read as the
user data says. Pure: the node class's text in, facts and notes out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from fleetwarden.core.pools import Taint
from fleetwarden.formats import bootstrap
from fleetwarden.formats.accounting import Path, View
from fleetwarden.formats.documents import Document, expect_str
from fleetwarden.formats.errors import FormatError

__all__ = ["Read", "max_pods", "read"]

_REPLACED = (
    "replaced by the registerWithTaints of the NodeConfig Karpenter appends after the user "
    "data's parts (nodeadm merges them in order, the later value wins): never registered"
)
_PODS_REPLACED = (
    "replaced by the maxPods of the NodeConfig Karpenter appends (it always sets one: the "
    "EC2NodeClass's kubelet.maxPods, else the instance type's pod count): never applied"
)
_FLAG = (
    "the userData passes --register-with-taints, which replaces the registerWithTaints Karpenter "
    "generates from the NodePool's taints (the kubelet's flags beat its configuration)"
)


@dataclass(slots=True)
class Read:
    """What the user data gives the nodes, and what it does to the NodePool's taints:
    ``pool_taints`` maps a NodePool taint not expected as it is read to (status, why):
    ``"ignored"`` (the Node keeps the flag's value) or ``"unresolved"``."""

    facts: bootstrap.BootFacts = field(default_factory=bootstrap.BootFacts)
    pool_taints: dict[Taint, tuple[str, str]] = field(default_factory=dict)


def read(
    doc: Document,
    view: View,
    spec: Mapping[str, Any],
    at: str,
    *,
    pool_taints: Sequence[Taint],
    al2023: bool,
    pool_api: str,
) -> Read | None:
    """The node class's ``userData`` (None: it has none), read as the nodes get it (see the
    module docstring); ``al2023``: the class is AL2023 and not ``Custom``. A value the kubelet
    or nodeadm refuses is a ``FormatError`` naming the field."""
    raw = spec.get("userData")
    if raw is None:
        return None
    where = f"{at}.userData"
    text = str(expect_str(doc, raw, where, allow_none=False))
    if al2023:
        text = _as_karpenter_passes_it(text)
    try:
        facts = bootstrap.from_user_data(text)
    except bootstrap.KubeletFlagError as exc:
        raise FormatError(doc.path, str(exc), field=doc.where(where)) from None
    out = Read(facts)
    if not al2023:
        return out
    if not facts.max_pods_flag:
        config = [u for u in facts.unresolved if u.startswith("maxPods")]
        if facts.max_pods is not None or config:
            shown = facts.max_pods if facts.max_pods is not None else " ".join(config)
            view.ignored(where, f"maxPods {shown}: {_PODS_REPLACED}")
        facts.max_pods = None
        facts.unresolved = [u for u in facts.unresolved if u not in config]
    if not facts.taints_flag:
        config = [u for u in facts.unresolved if u.startswith("registerWithTaints")]
        if facts.taints or config:
            shown = ", ".join(f"{t.key}={t.value or ''}:{t.effect}" for t in facts.taints)
            view.ignored(where, f"registerWithTaints {shown or ' '.join(config)}: {_REPLACED}")
        facts.taints = []
        facts.unresolved = [u for u in facts.unresolved if u not in config]
        return out
    flag = facts.taints
    for taint in pool_taints:
        if taint in flag:
            continue
        if any(t.key == taint.key and t.effect == taint.effect for t in flag):
            out.pool_taints[taint] = (
                "ignored",
                f"{_FLAG}: it gives {taint.key}:{taint.effect} its own value, which the Node "
                "keeps (Karpenter copies a NodeClaim taint only where the Node has none of "
                "that key and effect)",
            )
        elif pool_api == "karpenter.sh/v1":
            out.pool_taints[taint] = (
                "unresolved",
                f"{_FLAG}: Karpenter v1.0-v1.4 copies the NodePool's taints onto the Node at "
                "registration, v1.5 and later do not (karpenter.sh/do-not-sync-taints); the "
                "Karpenter release is not in the files",
            )
    return out


def max_pods(
    view: View,
    facts: bootstrap.BootFacts,
    at: str,
    pool_pods: tuple[View, Path | None, int | None],
    al2023: bool,
) -> int | None:
    """The pods the nodes get, given the user data's max-pods (``facts.max_pods``, not None)
    and ``pool_pods``: the NodePool's view, path and ``kubelet.maxPods`` (v1beta1, read
    first). On AL2023 Karpenter writes the NodePool's into its NodeConfig's kubelet
    configuration, which a user's ``--max-pods`` flag beats (a user's config maxPods is gone by
    now: ``read``); on AL2 Karpenter passes its own ``--max-pods`` to its bootstrap.sh call,
    which runs after the user data's parts (``eksbootstrap.go``)."""
    pods = facts.max_pods
    pool_view, pool_at, pool = pool_pods
    if pool is None:
        view.compared(f"{at}.userData", "allocatable.pods", pods)
        return pods
    if al2023 and facts.max_pods_flag and pool_at is not None:
        pool_view.superseded(
            pool_at,
            "allocatable.pods",
            f"the EC2NodeClass's userData passes --max-pods={pods}, which beats the maxPods "
            "Karpenter writes into its NodeConfig's kubelet configuration (the kubelet's flags "
            "beat its configuration)",
        )
        view.compared(f"{at}.userData", "allocatable.pods", pods)
        return pods
    view.ignored(
        f"{at}.userData",
        f"max-pods {pods}: Karpenter passes the NodePool's kubelet.maxPods ({pool}) as "
        "--max-pods to its bootstrap.sh call, which runs after the user data's parts: "
        "never applied",
    )
    return pool


def _as_karpenter_passes_it(text: str) -> str:
    """AL2023 user data as Karpenter hands it to nodeadm (``Nodeadm.parseUserData``): a MIME
    message as it is; else one part, ``application/node.eks.aws`` where the text unmarshals into
    a map (sigs.k8s.io/yaml: its first document is a mapping, or empty), a shell script where it
    does not. So a mapping that is no NodeConfig (``echo a: b`` in a script without ``#!``'s
    MIME) is a NodeConfig part nodeadm refuses, and is refused here as nodeadm refuses it."""
    if text.strip().startswith(("MIME-Version:", "Content-Type:")) or not text.strip():
        return text
    try:
        first = next(yaml.safe_load_all(text), None)
    except (yaml.YAMLError, ValueError, TypeError, RecursionError):
        return text  # a shell script part: read as plain user data
    if first is not None and not isinstance(first, Mapping):
        return text
    return (
        'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="//"\n\n'
        f"--//\nContent-Type: {_NODEADM_TYPE}\n\n{text}\n--//--\n"
    )


_NODEADM_TYPE = "application/node.eks.aws"
