"""Writing what `--out` names: every failure is one exit-2 line naming the path and the problem, never a traceback."""

from __future__ import annotations

import errno
from pathlib import Path

from infragen.errors import InputError

#: What each errno means for a path the user gave, in words that say what to change.
_REASONS = {
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.EROFS: "read-only file system",
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "disk quota exceeded",
    errno.ENAMETOOLONG: "file name too long",
    errno.EISDIR: "is a directory",
}


def _file_above(path: Path) -> Path | None:
    """The nearest existing parent of `path` that is not a directory (a path 'under a file'), if any."""
    for parent in path.parents:
        if parent.exists():
            return None if parent.is_dir() else parent
    return None


def _refuse(path: Path, exc: OSError, kind: str) -> InputError:
    above = _file_above(path)
    if above is not None:
        reason = f"{above} is a file, not a directory"
    elif exc.errno == errno.ENOENT:  # a pseudo file system (/proc, /sys) refuses new entries
        existing = next((p for p in path.parents if p.exists()), Path("/"))
        reason = f"{existing} does not accept new files or directories"
    else:
        reason = _REASONS.get(exc.errno or 0) or (exc.strerror or type(exc).__name__).lower()
    return InputError(f"--out {path}: cannot write {kind} there: {reason}")


def write_text_file(path: Path, text: str) -> None:
    """Write `text` to the file `path` (parents created)."""
    if path.is_dir():
        raise InputError(f"--out {path}: is a directory; give a file path such as {path / 'plan.json'}")
    above = _file_above(path)
    if above is not None:
        raise InputError(f"--out {path}: cannot write the file there: {above} is a file, not a directory")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise _refuse(path, exc, "the file") from None


def prepare_dir(path: Path) -> Path:
    """Create the directory `path` (and parents) for output files."""
    if path.exists() and not path.is_dir():
        raise InputError(f"--out {path}: exists and is a file; give a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _refuse(path, exc, "a directory") from None
    return path


def write_into(directory: Path, name: str, text: str) -> Path:
    """Write `text` to `directory/name`."""
    path = directory / name
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise _refuse(path, exc, "the file") from None
    return path
