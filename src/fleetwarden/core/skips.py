"""What was left out of a comparison, and why: every command that reads files reports it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Skip"]


@dataclass(frozen=True, slots=True)
class Skip:
    """A file or pool not compared, and why. ``problem``: it could not be read (a syntax
    error, an unrendered template); ``pool``: the desired pool (defined in ``path``) that is
    not compared. Both are shown always, not only with ``--verbose``: desired state that was
    not compared must not pass in silence."""

    path: str
    reason: str
    problem: bool = False
    pool: str | None = None

    @property
    def shown(self) -> bool:
        """Said even without ``--verbose``."""
        return self.problem or self.pool is not None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path, "reason": self.reason}
        if self.problem:
            out["problem"] = True
        if self.pool is not None:
            out["pool"] = self.pool
        return out
