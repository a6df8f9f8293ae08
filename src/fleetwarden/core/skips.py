"""What was left out of a comparison, and why: every command that reads files reports it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Skip"]


@dataclass(frozen=True, slots=True)
class Skip:
    """A file or pool not compared, and why. ``problem``: it could not be read (a syntax
    error, an unrendered template) — shown always, not only with ``--verbose``."""

    path: str
    reason: str
    problem: bool = False

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path, "reason": self.reason}
        if self.problem:
            out["problem"] = True
        return out
