"""Field descriptions from attribute docstrings, attached on demand (JSON Schema, docs/workload.md, tests).

pydantic's `use_attribute_docstrings` tokenizes and parses every model class's source at import, a large part of
`infragen plan`'s cold start; the plan never reads a description, so the few callers that do ask here instead.
Stdlib and pydantic only.
"""

from __future__ import annotations

import ast
import inspect
import sys
from functools import cache
from typing import Any, get_args

from pydantic import BaseModel


@cache
def _module_docs(filename: str) -> dict[str, dict[str, str]]:
    """class qualname -> {attribute: docstring} for every class in one source file (parsed once)."""
    with open(filename, encoding="utf-8") as fh:
        tree = ast.parse(fh.read(), filename)
    out: dict[str, dict[str, str]] = {}

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                name = f"{prefix}{node.name}"
                docs: dict[str, str] = {}
                for prev, stmt in zip(node.body, node.body[1:], strict=False):
                    # the rule pydantic applies: a string expression right after an annotated assignment
                    if (isinstance(prev, ast.AnnAssign) and isinstance(prev.target, ast.Name)
                            and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
                            and isinstance(stmt.value.value, str)):
                        docs[prev.target.id] = inspect.cleandoc(stmt.value.value)
                out[name] = docs
                visit(node.body, f"{name}.")

    visit(tree.body, "")
    return out


def _class_docs(cls: type) -> dict[str, str]:
    module = sys.modules.get(cls.__module__)
    filename = getattr(module, "__file__", None)
    if not filename or not filename.endswith(".py"):
        return {}
    return _module_docs(filename).get(cls.__qualname__, {})


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in get_args(annotation) for m in _models_in(arg)]  # Union, Optional, list, dict, Annotated


def _reachable(model: type[BaseModel], seen: dict[type[BaseModel], None]) -> None:
    if model in seen:
        return
    for info in model.model_fields.values():
        for inner in _models_in(info.annotation):
            _reachable(inner, seen)
    seen[model] = None  # children first, so a rebuild sees documented children


def document(model: type[BaseModel]) -> type[BaseModel]:
    """Give every field of `model` (and of the models its fields hold) its attribute docstring as description,
    then rebuild the schemas so `model_json_schema()` shows them. Idempotent; returns `model`."""
    order: dict[type[BaseModel], None] = {}
    _reachable(model, order)
    for m in order:
        if m.__dict__.get("__infragen_documented__"):
            continue
        docs: dict[str, str] = {}
        for klass in reversed(m.__mro__):  # a subclass's docstring wins over its base's
            if isinstance(klass, type) and issubclass(klass, BaseModel) and klass is not BaseModel:
                docs.update(_class_docs(klass))
        for name, info in m.model_fields.items():
            if info.description is None and name in docs:
                info.description = docs[name]
        m.model_rebuild(force=True)
        type.__setattr__(m, "__infragen_documented__", True)
    return model
