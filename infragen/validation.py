"""Turn YAML and pydantic failures into one-paragraph InputErrors naming the file and the field.

Used for every file a user hands us (workload, hardware, plan), so messages look the same everywhere.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from infragen import safe_load
from infragen.errors import InputError
from infragen.identifiers import shown

M = TypeVar("M", bound=BaseModel)


def load_yaml_file(path: Path, *, what: str = "YAML file") -> Any:
    """Read and parse a YAML (or JSON) file within infragen.safe_load's budgets (size, values, aliases, depth)."""
    return safe_load.load_yaml_file(path, what=what)


def load_json_file(path: Path, *, what: str = "JSON file") -> Any:
    """Read and parse a JSON file within the budgets (unique keys, finite numbers, bounded nesting)."""
    return safe_load.load_json_file(path, what=what)


def parse_yaml_text(text: str, path: Path | str) -> Any:
    """Parse YAML (or JSON) text within the budgets; failures are InputErrors with file, line and column."""
    return safe_load.parse_yaml_text(text, path)


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


_UNION_TAGS = {"str", "ModelArchitecture", "list[literal[...]]", "constrained-str"}
_TYPE_ERRORS = {
    "int_type", "int_parsing", "int_from_float", "float_type", "float_parsing", "bool_type", "bool_parsing",
    "string_type", "list_type", "literal_error", "none_required",
}


def _given(value: Any) -> str:
    # `shown` never builds the repr of the whole value (an alias-expanded structure can be huge).
    if isinstance(value, dict | list):
        return shown(value)
    return f"{type(value).__name__} {shown(value)}"


def _describe(err: dict[str, Any], model: type[BaseModel]) -> tuple[tuple[Any, ...], str]:
    """(location, message) for one pydantic error."""
    import difflib  # the error path only (a plan never reaches it)

    # pydantic tags union members and wrapped validators in the location; they are not user fields.
    loc = tuple(
        x for x in err["loc"] if x not in _UNION_TAGS and not (isinstance(x, str) and x.startswith("function-"))
    )
    ctx = err.get("ctx") or {}
    kind = err["type"]
    if kind == "conflict" and ctx.get("field"):
        loc = (*loc, ctx["field"])
    if kind == "extra_forbidden":
        name = str(loc[-1])[:100] if loc else "?"
        allowed = _fields_at(model, loc)
        close = difflib.get_close_matches(name, allowed, n=1, cutoff=0.5)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        allowed_txt = f" Allowed here: {', '.join(allowed)}." if allowed else ""
        return loc, f"{_loc(loc)}: unknown field{hint or ('.' if allowed_txt else '')}{allowed_txt}"
    msg = err["msg"]
    if kind in {"literal_error", "enum"}:
        given = err.get("input")
        expected = ctx.get("expected", "")
        options = [o.strip().strip("'") for o in str(expected).replace(" or ", ",").split(",") if o.strip()]
        text = given.lower()[:100] if isinstance(given, str) else ""
        close = difflib.get_close_matches(text, options, n=1, cutoff=0.5) if text else []
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return loc, f"{_loc(loc)}: {shown(given)} is not allowed{hint} (allowed: {expected})"
    if kind in {"model_type", "model_attributes_type", "dict_type"}:
        return loc, f"{_loc(loc)}: expected a mapping of fields (`key: value` lines), found {_given(err.get('input'))}"
    if kind == "invalid_key":
        return loc, f"{shown(err['loc'][-1])}: field names must be strings"
    if kind == "missing":
        return loc, f"{_loc(loc)}: required field missing"
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    if kind in _TYPE_ERRORS or kind.endswith(("_type", "_parsing")):
        msg = f"{msg}, found {_given(err.get('input'))}"
    elif kind in {"greater_than", "greater_than_equal", "less_than", "less_than_equal", "finite_number"}:
        msg = f"{msg}, found {shown(err.get('input'))}"
    return loc, f"{_loc(loc)}: {msg}"


#: Problems shown in one message; the rest are counted ("and 12 more").
MAX_SHOWN_PROBLEMS = 5
#: Pydantic errors examined at all: the message stays linear in this, however many the input produced.
_MAX_EXAMINED = 200


def validation_message(path: Path | str, exc: ValidationError, model: type[BaseModel]) -> str:
    """One paragraph: `file: field: problem; field: problem`, at most MAX_SHOWN_PROBLEMS of them."""
    errors = exc.errors(include_url=False, include_input=True, include_context=True)
    total = len(errors)
    described = [_describe(err, model) for err in errors[:_MAX_EXAMINED]]
    # A misspelt field also shows up as the real one missing; the "did you mean" line covers both.
    suggested = {
        (*loc[:-1], line.split("did you mean '")[1].split("'")[0])
        for loc, line in described
        if "unknown field; did you mean '" in line
    }
    unique: dict[str, None] = {}  # insertion-ordered set: linear de-duplication
    for loc, line in described:
        if line.endswith("required field missing") and loc in suggested:
            continue
        unique.setdefault(line, None)
    seen = list(unique)
    # A str|Model union reports the same mistake twice (once per member); keep the more useful one.
    if len(seen) > 1 and any("Input should be a valid string" in s for s in seen):
        seen = [s for s in seen if "Input should be a valid string" not in s] or seen
    more = len(seen) - MAX_SHOWN_PROBLEMS + max(0, total - _MAX_EXAMINED)
    tail = f" (and {more} more)" if more > 0 else ""
    return f"{path}: " + "; ".join(seen[:MAX_SHOWN_PROBLEMS]) + tail


def validate_file_data(path: Path | str, data: Any, model: type[M], *, what: str) -> M:
    """Validate parsed data against `model`, converting failures into an InputError."""
    if not isinstance(data, dict):
        kind = "empty" if data is None else type(data).__name__
        raise InputError(f"{path}: expected a mapping of {what} fields at the top level, found {kind}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise InputError(validation_message(path, exc, model)) from None
