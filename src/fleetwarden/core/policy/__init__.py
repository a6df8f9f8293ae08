"""The policy engine: (finding, route, history) → a decision, and why. Pure.

*State first, action second* (Flux helm-controller): ``decide`` reads the finding, where
ownership routes it and the guards' history, and returns a ``Decision`` value — what to do,
whether it may run now, and every reason. It acts on nothing and changes nothing; the caller
``record``\\ s the decision into the ``PolicyState`` (an explicit step, so a decision that is
thrown away leaves no trace) and the shell (``app/remediating.py``) carries it out.

Severity, layer and owner pick an action by the first matching ``PolicyRule``. A remediating
action then passes the guards:

* **cooldown** — the same finding is not acted on again within ``cooldown`` (its fix needs
  time to show); the same operation (same action on the same target) requested again in that
  time is *coalesced* onto the first decision instead of sent twice;
* **flap** — a pool healed ``flap_heals`` times within ``flap_window`` is not healed again:
  fleetwarden stops acting on it for ``flap_window`` and alerts. Actions on one pool within
  ``heal_burst`` of each other are one heal (a new node missing five labels is healed once);
* **blast radius** — at most N actions per ``window``, per cluster and fleet-wide; by default
  N is 10 % of the pools (floor 1). Windows slide: in no interval of length ``window`` do more
  than N actions become executable.

Modes: ``dry-run`` (the default: detection stays apart from remediation, seed 002) runs the
guards against a separate rehearsal history and marks what *would* run; ``enforce`` marks it
executable; ``approval`` parks it until ``approve`` (``fleetwarden approve ID``) makes it
executable for ``approval_ttl`` (a request not approved within ``pending_ttl`` expires; a new
request for the same drift is then made instead of being coalesced onto the dead one).
Statuses: ``planned`` (nothing for the remediator: ignore, alert, or covered by an earlier
decision), ``dry-run``, ``pending-approval``, ``blocked`` (a guard said no; the reason has the
numbers), ``execute``, ``cancelled`` (a request that can no longer be approved).

A request is approvable only under what it was made under: it records its mode and the
``fingerprint`` of the rules and routing that chose its action and target (``Decision.config``).
``cancellations`` lists the requests that expired, or were made in another mode or under another
configuration, each as a ``cancelled`` decision to record (and audit); ``approve`` with the
current mode and fingerprint cancels such a request instead of running it, and approving a
request already cancelled raises ``RequestCancelled`` (nothing to record, nothing to run).

The history survives a restart through the audit log: every decision, every approval's result
and every cancellation is a ``Decision`` whose ``to_json`` the shell stores;
``Decision.from_json`` reads it back and ``restore_state`` replays the decisions of the last
``Guards.replay_span`` through ``record`` — the same ledgers, rehearsal ones included, the
requests still waiting for approval and the ones cancelled. Replay is exact (the next ``decide``
answers as it would have without the restart) when ``2 · flap_heals · heal_burst <=
flap_window`` (defaults: 3 min against 30 min); with longer bursts a run of overlapping heals
that straddles the start of the replayed history can move the flap guard's heal count by one.
"""

from __future__ import annotations

from fleetwarden.core.policy.deciding import (
    approve,
    cancellations,
    decide,
    decide_all,
    deny,
    fingerprint,
    pause,
    record,
)
from fleetwarden.core.policy.decisions import (
    Decision,
    DecisionTarget,
    MalformedDecision,
    NodeRestore,
    RequestCancelled,
    UnknownDecision,
)
from fleetwarden.core.policy.policies import (
    DEFAULT_POLICY,
    DEFAULT_POLICY_RULES,
    REMEDIATIONS,
    Action,
    Guard,
    Guards,
    Mode,
    Policy,
    PolicyRule,
    Status,
)
from fleetwarden.core.policy.restoring import Replay, restore_state
from fleetwarden.core.policy.state import PolicyState
from fleetwarden.core.policy.warning import WarnRule, parse_warn

__all__ = [
    "DEFAULT_POLICY",
    "DEFAULT_POLICY_RULES",
    "REMEDIATIONS",
    "Action",
    "Decision",
    "DecisionTarget",
    "Guard",
    "Guards",
    "MalformedDecision",
    "Mode",
    "NodeRestore",
    "Policy",
    "PolicyRule",
    "PolicyState",
    "Replay",
    "RequestCancelled",
    "Status",
    "UnknownDecision",
    "WarnRule",
    "approve",
    "cancellations",
    "decide",
    "decide_all",
    "deny",
    "fingerprint",
    "parse_warn",
    "pause",
    "record",
    "restore_state",
]
