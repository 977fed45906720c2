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


#: Longest path an error message repeats in full (a 5,000-character name is shown by its start and length).
_SHOWN_CHARS = 200


def _shown(path: Path) -> str:
    text = str(path)
    return text if len(text) <= _SHOWN_CHARS else f"{text[:_SHOWN_CHARS]}... ({len(text):,} characters)"


def _exists(path: Path) -> bool:
    """Path.exists, False where the path cannot even be looked up (a name too long, a loop)."""
    try:
        return path.exists()
    except OSError:
        return False


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:
        return False


def _file_above(path: Path) -> Path | None:
    """The nearest existing parent of `path` that is not a directory (a path 'under a file'), if any."""
    for parent in path.parents:
        if _exists(parent):
            return None if _is_dir(parent) else parent
    return None


def _refuse(path: Path, exc: OSError, kind: str, option: str) -> InputError:
    above = _file_above(path)
    if above is not None:
        reason = f"{_shown(above)} is a file, not a directory"
    elif exc.errno == errno.ENOENT:  # a pseudo file system (/proc, /sys) refuses new entries
        existing = next((p for p in path.parents if _exists(p)), Path("/"))
        reason = f"{_shown(existing)} does not accept new files or directories"
    else:
        reason = _REASONS.get(exc.errno or 0) or (exc.strerror or type(exc).__name__).lower()
    return InputError(f"{option} {_shown(path)}: cannot write {kind} there: {reason}")


def write_text_file(path: Path, text: str, *, option: str = "--out", example: str = "plan.json") -> None:
    """Write `text` to the file `path` (parents created); `option` names where the path came from, `example` a
    file name the error for a directory suggests."""
    if _is_dir(path):
        raise InputError(f"{option} {_shown(path)}: is a directory; give a file path such as "
                         f"{_shown(path / example)}")
    above = _file_above(path)
    if above is not None:
        raise InputError(f"{option} {_shown(path)}: cannot write the file there: {_shown(above)} is a file, not a "
                         "directory")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise _refuse(path, exc, "the file", option) from None


def prepare_dir(path: Path, *, option: str = "--out") -> Path:
    """Create the directory `path` (and parents) for output files."""
    if _exists(path) and not _is_dir(path):
        raise InputError(f"{option} {_shown(path)}: exists and is a file; give a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _refuse(path, exc, "a directory", option) from None
    return path


def write_into(directory: Path, name: str, text: str) -> Path:
    """Write `text` to `directory/name`."""
    path = directory / name
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise _refuse(path, exc, "the file", "--out") from None
    return path
