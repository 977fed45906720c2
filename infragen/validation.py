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


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate mapping keys (PyYAML would silently keep the last one)."""


def _construct_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: dict[Any, yaml.Node] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue  # `<<: *anchor` then an explicit key is an override, not a duplicate
        key = loader.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
        try:
            duplicate = key in seen
        except TypeError:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping", node.start_mark, "found an unhashable key", key_node.start_mark
            ) from None
        if duplicate:
            first = seen[key].start_mark
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (first given on line {first.line + 1})", key_node.start_mark
            )
        seen[key] = key_node
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def parse_yaml_text(text: str, path: Path | str) -> Any:
    """Parse YAML (or JSON) text; failures are InputErrors with file, line and column."""
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader subclass: plain data only
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "unknown position"
        problem = exc.problem or exc.context or "invalid YAML"
        raise InputError(f"{path}: malformed YAML at {where}: {problem}") from None
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: malformed YAML: {exc}") from None
    except RecursionError:
        raise InputError(f"{path}: malformed YAML: nested too deeply") from None


def load_yaml_file(path: Path) -> Any:
    """Read and parse a YAML (or JSON) file with file, line and column in the error."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, expected a YAML file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read: {exc}") from None
    return parse_yaml_text(text, path)


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
    text = repr(value)
    kind = type(value).__name__
    if isinstance(value, dict | list):
        return f"a {kind} {text[:40]}{'...' if len(text) > 40 else ''}"
    return f"{kind} {text[:40]}{'...' if len(text) > 40 else ''}"


def _describe(err: dict[str, Any], model: type[BaseModel]) -> tuple[tuple[Any, ...], str]:
    """(location, message) for one pydantic error."""
    # pydantic tags union members and wrapped validators in the location; they are not user fields.
    loc = tuple(
        x for x in err["loc"] if x not in _UNION_TAGS and not (isinstance(x, str) and x.startswith("function-"))
    )
    ctx = err.get("ctx") or {}
    kind = err["type"]
    if kind == "conflict" and ctx.get("field"):
        loc = (*loc, ctx["field"])
    if kind == "extra_forbidden":
        name = str(loc[-1]) if loc else "?"
        allowed = _fields_at(model, loc)
        close = difflib.get_close_matches(name, allowed, n=1, cutoff=0.5)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        allowed_txt = f" Allowed here: {', '.join(allowed)}." if allowed else ""
        return loc, f"{_loc(loc)}: unknown field{hint}{allowed_txt}"
    msg = err["msg"]
    if kind in {"literal_error", "enum"}:
        given = err.get("input")
        expected = ctx.get("expected", "")
        options = [o.strip().strip("'") for o in str(expected).replace(" or ", ",").split(",") if o.strip()]
        close = difflib.get_close_matches(str(given).lower(), options, n=1, cutoff=0.5)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return loc, f"{_loc(loc)}: {given!r} is not allowed{hint} (allowed: {expected})"
    if kind in {"model_type", "model_attributes_type", "dict_type"}:
        return loc, f"{_loc(loc)}: expected a mapping of fields (`key: value` lines), found {_given(err.get('input'))}"
    if kind == "invalid_key":
        return loc, f"{err['loc'][-1]!r}: field names must be strings"
    if kind == "missing":
        return loc, f"{_loc(loc)}: required field missing"
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    if kind in _TYPE_ERRORS or kind.endswith(("_type", "_parsing")):
        msg = f"{msg}, found {_given(err.get('input'))}"
    elif kind in {"greater_than", "greater_than_equal", "less_than", "less_than_equal", "finite_number"}:
        msg = f"{msg}, found {err.get('input')!r}"
    return loc, f"{_loc(loc)}: {msg}"


def validation_message(path: Path | str, exc: ValidationError, model: type[BaseModel]) -> str:
    """One paragraph: `file: field: problem; field: problem`."""
    described = [_describe(err, model) for err in exc.errors(include_url=False)]
    # A misspelt field also shows up as the real one missing; the "did you mean" line covers both.
    suggested = {
        (*loc[:-1], line.split("did you mean '")[1].split("'")[0])
        for loc, line in described
        if "unknown field; did you mean '" in line
    }
    seen: list[str] = []
    for loc, line in described:
        if line.endswith("required field missing") and loc in suggested:
            continue
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
