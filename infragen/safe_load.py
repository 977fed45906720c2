"""Bounded reading and parsing of the files users hand us (workload YAML, plan JSON, config.json).

Every file may come from a stranger (a pull request, a CI artifact): sizes, nesting, node counts, alias expansion
and integer lengths are capped here, before anything else sees the data, and each refusal is an InputError naming
the file (and the line, where YAML knows it). Imports only yaml and infragen.errors.
"""

from __future__ import annotations

import json
import math
import re
import stat
from pathlib import Path
from typing import Any

import yaml

from infragen.errors import InputError

#: Largest workload / plan / config.json accepted. Real ones are a few KB (plans with alternatives ~30 KB,
#: the largest Hugging Face config.json files with label maps ~200 KB).
MAX_FILE_BYTES = 1024 * 1024
#: Nodes (scalars, lists, mappings) one YAML document may hold once aliases are expanded. A workload or stack
#: config has ~50 (plans and config.json are JSON); pure-Python YAML composes ~10,000 nodes a second, so this
#: also bounds the time.
MAX_NODES = 5_000
#: Alias uses (`*name`) per document: merge keys and a few shared blocks need a handful.
MAX_ALIASES = 100
#: Nesting depth of lists and mappings (a workload nests 3 deep, a plan 4).
MAX_DEPTH = 32
#: Digits in one integer literal; Python refuses > 4,300 when converting, no real figure needs more than 20.
MAX_INT_DIGITS = 30


def read_text_bounded(path: Path, *, what: str = "file", limit: int = MAX_FILE_BYTES) -> str:
    """The UTF-8 text of a regular file of at most `limit` bytes; anything else is an InputError."""
    try:
        st = path.stat()
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"{path}: is a directory, expected a {what}")
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{path}: not a regular file (a device, pipe or socket); expected a {what}")
    if st.st_size > limit:
        raise InputError(f"{path}: {st.st_size} bytes; a {what} may be at most {limit} bytes")
    try:
        with open(path, "rb") as handle:
            raw = handle.read(limit + 1)
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(raw) > limit:
        raise InputError(f"{path}: larger than {limit} bytes; a {what} may be at most {limit} bytes")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (byte {exc.start})") from None


# --- YAML ----------------------------------------------------------------------------------------------------


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader with budgets: nodes (after alias expansion), aliases, depth; unique string keys; short ints."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._aliases = 0
        self._nodes = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise _problem(self.peek_event().start_mark, f"more than {MAX_ALIASES} aliases (*name)")
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise _problem(self.peek_event().start_mark, f"nested more than {MAX_DEPTH} levels deep")
        self._nodes += 1
        if self._nodes > MAX_NODES:
            raise _problem(self.peek_event().start_mark, f"more than {MAX_NODES} values")
        try:
            return super().compose_node(parent, index)  # type: ignore[no-any-return]
        finally:
            self._depth -= 1

    def compose_document(self) -> yaml.Node:
        node: yaml.Node = super().compose_document()
        _check_expansion(node)
        return node


def _problem(mark: Any, text: str) -> yaml.MarkedYAMLError:
    return yaml.constructor.ConstructorError(None, None, text, mark)


def _check_expansion(root: yaml.Node) -> None:
    """Refuse documents whose aliases expand beyond MAX_NODES values, or refer to themselves.

    Linear in the distinct nodes: each node's expanded size is computed once (iteratively, no recursion)."""
    size: dict[int, int] = {}
    active: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        children = _children(node)
        if done:
            active.discard(key)
            total = 1 + sum(size[id(c)] for c in children)
            size[key] = total
            if total > MAX_NODES:
                raise _problem(node.start_mark, f"aliases expand to more than {MAX_NODES} values")
            continue
        if key in size:
            continue
        if key in active:
            raise _problem(node.start_mark, "an alias refers to the collection that contains it")
        active.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in size)
        for c in children:
            if id(c) in active:
                raise _problem(c.start_mark, "an alias refers to the collection that contains it")


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def _construct_mapping(loader: _BoundedLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: dict[str, yaml.Node] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue  # `<<: *anchor` then an explicit key is an override, not a duplicate
        key = loader.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
        if not isinstance(key, str):
            raise yaml.constructor.ConstructorError(
                None, None,
                f"field names must be text, found {type(key).__name__} {_short(key)} (quote it, or YAML 1.1 reads "
                "yes/no/on/off as booleans)", key_node.start_mark)
        if key in seen:
            first = seen[key].start_mark
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {_short(key)} (first given on line {first.line + 1})", key_node.start_mark
            )
        seen[key] = key_node
    return loader.construct_mapping(node, deep=deep)


def _construct_int(loader: _BoundedLoader, node: yaml.ScalarNode) -> int:
    digits = sum(ch.isdigit() for ch in str(node.value))
    if digits > MAX_INT_DIGITS:
        raise yaml.constructor.ConstructorError(
            None, None, f"an integer of {digits} digits; numbers here have at most {MAX_INT_DIGITS}", node.start_mark)
    return loader.construct_yaml_int(node)  # type: ignore[no-untyped-call, no-any-return]


def _short(value: object) -> str:
    text = repr(value) if not isinstance(value, str) else repr(value[:40])
    return text[:44]


_BoundedLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_BoundedLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)


def parse_yaml_text(text: str, path: Path | str) -> Any:
    """Parse YAML (or JSON) text within the budgets; failures are InputErrors with file, line and column."""
    try:
        return yaml.load(text, Loader=_BoundedLoader)  # a SafeLoader subclass: plain data only
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "unknown position"
        problem = exc.problem or exc.context or "invalid YAML"
        if isinstance(exc, yaml.constructor.ConstructorError):  # well-formed, but refused (keys, budgets)
            raise InputError(f"{path}: {where}: {problem}") from None
        raise InputError(f"{path}: malformed YAML at {where}: {problem}") from None
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: malformed YAML: {str(exc)[:200]}") from None
    except RecursionError:
        raise InputError(f"{path}: malformed YAML: nested too deeply") from None


# --- JSON (config.json) --------------------------------------------------------------------------------------


def parse_json_text(text: str, path: Path | str) -> Any:
    """Parse JSON within the budgets: unique keys, finite numbers, short integers, bounded nesting."""

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                raise InputError(f"{path}: duplicate key {_short(key)} in a JSON object")
            out[key] = value
        return out

    def number(text: str) -> float:
        value = float(text)
        if not math.isfinite(value):
            raise InputError(f"{path}: the number {text[:40]} is out of range (JSON numbers here must be finite)")
        return value

    def integer(text: str) -> int:
        if len(text.lstrip("-")) > MAX_INT_DIGITS:
            raise InputError(f"{path}: an integer of {len(text)} digits; numbers here have at most {MAX_INT_DIGITS}")
        return int(text)

    def constant(name: str) -> Any:
        raise InputError(f"{path}: {name} is not a number JSON allows (numbers here must be finite)")

    if _json_depth(text) > MAX_DEPTH:
        raise InputError(f"{path}: JSON nested more than {MAX_DEPTH} levels deep")
    try:
        return json.loads(text, object_pairs_hook=pairs, parse_float=number, parse_int=integer,
                          parse_constant=constant)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise InputError(f"{path}: JSON nested too deeply") from None


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_BRACKET = re.compile(r"[\[\]{}]")


def _json_depth(text: str) -> int:
    """Deepest bracket nesting outside strings (checked before the recursive decoder runs)."""
    depth = deepest = 0
    for match in _BRACKET.finditer(_JSON_STRING.sub("", text)):
        depth += 1 if match.group() in "[{" else -1
        deepest = max(deepest, depth)
    return deepest


def load_yaml_file(path: Path, *, what: str = "YAML file") -> Any:
    """Read and parse a YAML (or JSON) file within the budgets."""
    return parse_yaml_text(read_text_bounded(path, what=what), path)


def load_json_file(path: Path, *, what: str = "JSON file") -> Any:
    """Read and parse a JSON file within the budgets."""
    return parse_json_text(read_text_bounded(path, what=what), path)


__all__ = ["MAX_FILE_BYTES", "load_json_file", "load_yaml_file", "parse_json_text", "parse_yaml_text",
           "read_text_bounded"]
