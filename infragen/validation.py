"""Turn YAML and pydantic failures into one-paragraph InputErrors naming the file and the field.

Used for every file a user hands us (workload, hardware, plan), so messages look the same everywhere.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from infragen.errors import InputError

M = TypeVar("M", bound=BaseModel)


def load_yaml_file(path: Path) -> Any:
    """Parse YAML (or JSON) with file, line and column in the error."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, expected a YAML file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read: {exc}") from None
    try:
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "unknown position"
        problem = exc.problem or exc.context or "invalid YAML"
        raise InputError(f"{path}: malformed YAML at {where}: {problem}") from None
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: malformed YAML: {exc}") from None


def _loc(loc: tuple[Any, ...]) -> str:
    parts: list[str] = []
    for item in loc:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        else:
            # pydantic adds union-member tags (e.g. 'str', 'ModelArchitecture'); keep them out of paths
            parts.append(("." if parts else "") + str(item))
    return "".join(parts) or "(top level)"


def _fields_at(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """Field names valid at the parent of `loc`, for 'did you mean'."""
    current: Any = model
    for item in loc[:-1]:
        if isinstance(item, int) or current is None:
            continue
        fields = getattr(current, "model_fields", None)
        if not fields or item not in fields:
            return []
        ann = fields[item].annotation
        current = _first_model(ann)
    fields = getattr(current, "model_fields", None)
    return list(fields) if fields else []


def _first_model(ann: Any) -> Any:
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return ann
    for arg in getattr(ann, "__args__", ()) or ():
        found = _first_model(arg)
        if found is not None:
            return found
    return None


def _describe(err: dict[str, Any], model: type[BaseModel]) -> str:
    loc = tuple(x for x in err["loc"] if x not in {"str", "ModelArchitecture", "list[literal[...]]"})
    kind = err["type"]
    if kind == "extra_forbidden":
        name = str(loc[-1]) if loc else "?"
        allowed = _fields_at(model, loc)
        close = difflib.get_close_matches(name, allowed, n=1, cutoff=0.5)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        allowed_txt = f" Allowed here: {', '.join(allowed)}." if allowed else ""
        return f"{_loc(loc)}: unknown field{hint}{allowed_txt}"
    msg = err["msg"]
    if kind in {"literal_error", "enum"}:
        given = err.get("input")
        expected = err.get("ctx", {}).get("expected", "")
        options = [o.strip().strip("'") for o in expected.replace(" or ", ",").split(",") if o.strip()]
        close = difflib.get_close_matches(str(given).lower(), options, n=1, cutoff=0.5)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return f"{_loc(loc)}: {given!r} is not allowed{hint} (allowed: {expected})"
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    return f"{_loc(loc)}: {msg}"


def validation_message(path: Path | str, exc: ValidationError, model: type[BaseModel]) -> str:
    """One paragraph: `file: field: problem; field: problem`."""
    seen: list[str] = []
    for err in exc.errors(include_url=False):
        line = _describe(err, model)
        if line not in seen:
            seen.append(line)
    # A str|Model union reports the same mistake twice (once per member); keep the more useful one.
    if len(seen) > 1 and any("Input should be a valid string" in s for s in seen):
        seen = [s for s in seen if "Input should be a valid string" not in s] or seen
    shown = seen[:5]
    more = f" (and {len(seen) - 5} more)" if len(seen) > 5 else ""
    return f"{path}: " + "; ".join(shown) + more


def validate_file_data(path: Path | str, data: Any, model: type[M], *, what: str) -> M:
    """Validate parsed data against `model`, converting failures into an InputError."""
    if not isinstance(data, dict):
        kind = "empty" if data is None else type(data).__name__
        raise InputError(f"{path}: expected a mapping of {what} fields at the top level, found {kind}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise InputError(validation_message(path, exc, model)) from None
