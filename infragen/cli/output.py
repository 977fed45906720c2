"""Writing what `--out` names: every failure is one exit-2 line naming the path, never a traceback."""

from __future__ import annotations

from pathlib import Path

from infragen.errors import InputError


def _refuse(path: Path, exc: OSError) -> InputError:
    reason = exc.strerror or type(exc).__name__
    return InputError(f"--out {path}: cannot write there: {reason}",
                      fix="give a writable path (a file for `plan`, a directory for `render`)")


def write_text_file(path: Path, text: str) -> None:
    """Write `text` to the file `path` (parents created)."""
    if path.is_dir():
        raise InputError(f"--out {path}: is a directory; give a file path such as {path / 'plan.json'}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise _refuse(path, exc) from None


def prepare_dir(path: Path) -> Path:
    """Create the directory `path` (and parents) for output files."""
    if path.exists() and not path.is_dir():
        raise InputError(f"--out {path}: exists and is not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _refuse(path, exc) from None
    return path


def write_into(directory: Path, name: str, text: str) -> Path:
    """Write `text` to `directory/name`."""
    path = directory / name
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise _refuse(path, exc) from None
    return path
