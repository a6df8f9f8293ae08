"""Values and types named for people, in messages and tables: "a mapping", "null (nothing)",
``Unknown → Ready``, ``(none) → hound`` — never a Python type name or repr (a YAML user has no
``NoneType``, and ``{'from': 'Unknown'}`` is how Python prints, not how people read)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # policy imports this module: the name is for the annotation only
    from fleetwarden.core.policy import Decision

__all__ = [
    "decision_summary",
    "describe_drift",
    "describe_type",
    "show_change",
    "show_details",
    "show_value",
]

NONE = "(none)"
ARROW = "→"

_NAMES: dict[type, str] = {
    dict: "a mapping",
    list: "a list",
    tuple: "a list",
    str: "a string",
    bool: "a boolean",
    int: "an integer",
    float: "a number",
    bytes: "binary data",
    type(None): "null (nothing)",
}


def describe_type(value: object) -> str:
    for kind, name in _NAMES.items():
        if type(value) is kind:
            return name
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, str):
        return "a string"
    return "a value of an unsupported kind"


def show_value(value: object) -> str:
    """A desired, observed or event value as text: ``(none)`` for null or an empty list, text
    as it is (``""`` for the empty string), ``true``/``false``, numbers as written, a list
    comma-separated, a mapping with ``from`` and ``to`` as ``A → B``, any other mapping as
    ``key=value`` pairs."""
    if value is None:
        return NONE
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value if value else '""'
    if isinstance(value, int | float):
        return f"{value:g}" if isinstance(value, float) else str(value)
    if isinstance(value, Mapping):
        return show_details(value)
    if isinstance(value, Sequence | set | frozenset):
        items = sorted(value, key=str) if isinstance(value, set | frozenset) else value
        return ", ".join(show_value(v) for v in items) or NONE
    return str(value)


def show_change(before: object, after: object) -> str:
    """``before → after``, each as ``show_value`` gives it."""
    return f"{show_value(before)} {ARROW} {show_value(after)}"


def show_details(details: Mapping[str, object]) -> str:
    """An event's details or a structured value on one line: ``pool NAME:`` first, ``from``
    and ``to`` as a change, the other keys as ``key=value`` (null ones left out), a
    ``reason`` last, in parentheses."""
    rest = {k: v for k, v in details.items() if v is not None}
    parts: list[str] = []
    pool = rest.pop("pool", None)
    if "from" in details and "to" in details:
        rest.pop("from", None)
        rest.pop("to", None)
        parts.append(show_change(details["from"], details["to"]))
    reason = rest.pop("reason", None)
    parts.extend(f"{k}={show_value(v)}" for k, v in rest.items())
    text = ", ".join(parts)
    if pool is not None:
        text = f"pool {show_value(pool)}: {text}" if text else f"pool {show_value(pool)}"
    if reason is not None:
        text = f"{text} ({show_value(reason)})" if text else show_value(reason)
    return text


def describe_drift(expected: object, actual: object, nodes: Sequence[str]) -> str:
    """``expected X, actual Y on N nodes``; a finding about the pool as a whole (no node shows
    it: a count, a missing pool) says ``pool-level`` instead of a node count."""
    where = (
        "(pool-level)" if not nodes else f"on {len(nodes)} node" + ("" if len(nodes) == 1 else "s")
    )
    return f"expected {show_value(expected)}, actual {show_value(actual)} {where}"


# The notes a decision's mode adds after its real reasons (core.policy.decide).
_MODE_NOTES = ("dry-run:", "approval mode:")
_ACTS = ("execute", "dry-run", "pending-approval")


def decision_summary(decision: Decision) -> str:
    """A decision on one line, by what explains its status: what it does (or would do) when
    it acts, the guard's reason when a guard stopped it — never only its mode's note
    ("blocked: restore — dry-run: nothing would be sent" hid the blast-radius guard)."""
    status, action, mode = decision.status.value, decision.action.value, decision.mode.value
    if status in _ACTS and decision.target is not None:
        return f"{status}: {action} {decision.target.describe()}"
    reasons = [r for r in decision.reasons if not r.startswith(_MODE_NOTES)]
    cause = reasons[-1] if reasons else (decision.reasons[-1] if decision.reasons else "")
    head = f"{status} ({mode})" if status == "blocked" and mode == "dry-run" else status
    return f"{head}: {action} — {cause}" if cause else f"{head}: {action}"
