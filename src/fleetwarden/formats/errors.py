"""The one error every reader raises for bad input: it names the file, the field and why."""

from __future__ import annotations

__all__ = ["FormatError"]


class FormatError(ValueError):
    def __init__(
        self, path: str, reason: str, *, field: str | None = None, line: int | None = None
    ) -> None:
        self.path, self.reason, self.field, self.line = path, reason, field, line
        where = path if line is None else f"{path}:{line}"
        super().__init__(f"{where}: {field}: {reason}" if field else f"{where}: {reason}")

    def __reduce__(self) -> tuple[object, ...]:  # survives a trip through a worker process
        return (_rebuild, (self.path, self.reason, self.field, self.line))


def _rebuild(path: str, reason: str, field: str | None, line: int | None) -> FormatError:
    return FormatError(path, reason, field=field, line=line)
