"""The ``leaderElection`` section of the service config::

    leaderElection:
      context: mgmt              # the kubeconfig context whose API server holds the Lease
      # inCluster: true          # ... or the API server of the pod serve runs in (not both)
      namespace: fleetwarden
      name: fleetwarden-leader   # default: fleetwarden
      leaseSeconds: 15           # default 15
      renewDeadlineSeconds: 10   # default 2/3 of leaseSeconds
      retryPeriodSeconds: 2      # default 2/15 of leaseSeconds

Absent: no election (one replica acts, as before). Every refusal is a ``FormatError`` naming the
file, the field (``leaderElection.renewDeadlineSeconds``) and what to change; the timing rules
are ``core.leadership.ElectionTiming``'s (renew deadline shorter than the lease, longer than
1.2 retry periods).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fleetwarden.core.leadership import ElectionTiming
from fleetwarden.formats.errors import FormatError

__all__ = ["SCHEMA", "LeaderElectionConfig", "leader_election_from"]

SECTION = "leaderElection"
# the service schema's entry: this module checks the section itself, with precise errors
SCHEMA: dict[str, Any] = {"type": "object"}
_KEYS = (
    "context",
    "inCluster",
    "namespace",
    "name",
    "leaseSeconds",
    "renewDeadlineSeconds",
    "retryPeriodSeconds",
)
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")  # RFC 1123 label (namespace)
_SUBDOMAIN = re.compile(
    r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)


@dataclass(frozen=True, slots=True)
class LeaderElectionConfig:
    """Where the Lease lives (a kubeconfig ``context`` or ``in_cluster``) and its timing."""

    namespace: str
    name: str = "fleetwarden"
    context: str | None = None
    in_cluster: bool = False
    timing: ElectionTiming = field(default_factory=ElectionTiming)


def leader_election_from(raw: Any, *, source: str) -> LeaderElectionConfig | None:
    """The section ``raw`` (``config.get("leaderElection")``) of the file ``source``; None when
    it is absent."""
    if raw is None:
        return None

    def fail(key: str | None, reason: str) -> FormatError:
        return FormatError(source, reason, field=f"{SECTION}.{key}" if key else SECTION)

    if not isinstance(raw, Mapping):
        raise fail(None, "must be a mapping (context or inCluster, namespace, name, leaseSeconds)")
    for key in raw:
        if key not in _KEYS:
            raise fail(str(key), f"unknown field; the fields are {', '.join(_KEYS)}")
    context, in_cluster = raw.get("context"), raw.get("inCluster", False)
    if context is not None and (not isinstance(context, str) or not context):
        raise fail("context", "must be the name of a kubeconfig context")
    if not isinstance(in_cluster, bool):
        raise fail("inCluster", "must be true or false")
    if bool(context) == in_cluster:
        raise fail(
            None,
            "say where the Lease lives: context: NAME (a kubeconfig context) or inCluster: "
            "true (the pod's own API server), exactly one of them",
        )
    namespace = raw.get("namespace")
    if not isinstance(namespace, str) or not _LABEL.match(namespace):
        raise fail("namespace", "required: a namespace name (lowercase RFC 1123 label)")
    name = raw.get("name", "fleetwarden")
    if not isinstance(name, str) or not _SUBDOMAIN.match(name):
        raise fail("name", "must be a Lease name (lowercase RFC 1123 subdomain)")
    lease = raw.get("leaseSeconds", 15)
    if isinstance(lease, bool) or not isinstance(lease, int) or lease < 1:
        raise fail("leaseSeconds", "must be a whole number of seconds, at least 1")
    deadline = _seconds(raw, "renewDeadlineSeconds", lease * 2 / 3, fail)
    retry = _seconds(raw, "retryPeriodSeconds", lease * 2 / 15, fail)
    if not deadline < lease:
        raise fail(
            "renewDeadlineSeconds",
            f"{deadline:g} must be shorter than leaseSeconds ({lease}): a leader must stop "
            "acting before another replica may take the lease",
        )
    try:
        timing = ElectionTiming(lease, deadline, retry)
    except ValueError as exc:
        raise fail("retryPeriodSeconds", str(exc)) from None
    return LeaderElectionConfig(
        namespace=namespace, name=name, context=context, in_cluster=in_cluster, timing=timing
    )


def _seconds(
    raw: Mapping[str, Any],
    key: str,
    default: float,
    fail: Callable[[str | None, str], FormatError],
) -> float:
    value = raw.get(key, default)
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise fail(key, "must be a positive number of seconds")
    return float(value)
