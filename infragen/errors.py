"""Expected failures, each a distinct type so the CLI can map it to an exit status.

Bugs are not InfragenErrors: they keep their tracebacks. Nothing here imports the rest of infragen.
"""

from __future__ import annotations

from collections.abc import Iterable


class InfragenError(Exception):
    """An expected failure shown to the user as one `Error:` paragraph (plus optional fix and hint)."""

    exit_code = 1

    def __init__(self, message: str, *, fix: str | None = None, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix
        self.hint = hint

    def render(self) -> str:
        lines = [f"Error: {self.message}"]
        if self.fix:
            lines.append(f"  To fix: {self.fix}")
        if self.hint:
            lines.append(f"  Hint: {self.hint}")
        return "\n".join(lines)


class InputError(InfragenError):
    """Bad user input (workload file, CLI option, hardware file, plan file): exit status 2."""

    exit_code = 2


def _plural(kind: str) -> str:
    """`instance family` -> `instance families`, `region` -> `regions`."""
    return kind[:-1] + "ies" if kind.endswith("y") and kind[-2:-1] not in "aeiou" else kind + "s"


class UnknownNameError(InputError):
    """A name (model, GPU, instance type, field) that is not known; carries close matches."""

    def __init__(self, kind: str, name: str, known: Iterable[str], *, where: str = "") -> None:
        import difflib  # on the error path only: every command imports this module

        known = sorted(set(known))
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
        if not close:
            low = name.lower()
            close = [k for k in known if low in k.lower() or k.lower() in low][:3]
        prefix = f"{where}: " if where else ""
        msg = f"{prefix}unknown {kind} {name!r}"
        if close:
            msg += "; did you mean " + " or ".join(repr(c) for c in close) + "?"
        hint = None
        if len(known) <= 40:
            hint = f"known {_plural(kind)}: {', '.join(known)}"
        super().__init__(msg, hint=hint)
        self.name = name
        self.suggestions = close


class DataError(InfragenError):
    """A packaged or user-supplied data file breaks its schema or lacks a figure the model needs."""

    exit_code = 2


class MissingFigureError(DataError):
    """A figure the sizing engine needs is absent from the data (we never guess it)."""


class InfeasibleError(InfragenError):
    """The workload cannot be served under its constraints: exit status 3, with what would fix it."""

    exit_code = 3


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """A ' (did you mean X?)' suffix, or '' when nothing is close."""
    import difflib

    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
