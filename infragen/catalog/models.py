"""The model registry (`data/models.yaml`) and model-reference resolution for the workload spec.

Reads the packaged file on call (cached), never at import; never imports sizing, render or the hardware catalog.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from infragen.architecture import ModelArchitecture
from infragen.catalog.parsed import data_dir, load_yaml_text
from infragen.errors import DataError, InputError, UnknownNameError
from infragen.validation import validation_message

__all__ = ["ModelRegistryFile", "load_model_registry", "registry_from_file", "resolve_model"]

DATA_FILE = "models.yaml"


class ModelRegistryFile(BaseModel):
    """`models.yaml`: the registry file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[1]
    """Version of this file's layout."""
    source: str
    """Where the file's figures come from (each entry adds its own `source`)."""
    as_of: str
    """Date the figures were last checked (YYYY-MM-DD)."""
    notes: str = ""
    """Caveats for reviewers."""
    models: list[ModelArchitecture]
    """One entry per model."""


def _key(name: str) -> str:
    return name.strip().lower()


def registry_from_file(path: Path | str, data: Any) -> dict[str, ModelArchitecture]:
    """Validate parsed registry data: schema, ids, sources, published counts, unique ids and aliases."""
    try:
        parsed = ModelRegistryFile.model_validate(data)
    except ValidationError as exc:
        raise DataError(validation_message(path, exc, ModelRegistryFile)) from None
    by_id: dict[str, ModelArchitecture] = {}
    owner: dict[str, str] = {}
    for entry in parsed.models:
        where = f"{path}: model {entry.id!r}"
        if entry.id != _key(entry.id) or " " in entry.id or entry.id == "custom":
            raise DataError(f"{where}: ids are lowercase, dashed and not 'custom'")
        if not entry.source or not entry.published_params_b or not entry.published_params_source:
            raise DataError(f"{where}: needs source, published_params_b and published_params_source")
        if entry.is_moe and entry.published_active_params_b is None:
            raise DataError(f"{where}: a MoE entry needs published_active_params_b")
        for name in (entry.id, *entry.aliases):
            k = _key(name)
            if k in owner and owner[k] != entry.id:
                raise DataError(f"{where}: name {name!r} already belongs to {owner[k]!r}")
            owner[k] = entry.id
        if entry.id in by_id:
            raise DataError(f"{where}: duplicate id")
        by_id[entry.id] = entry
    return by_id


@functools.cache
def load_model_registry() -> Mapping[str, ModelArchitecture]:
    """Registry id -> architecture, read once from the packaged `models.yaml`."""
    ref = data_dir() / DATA_FILE
    data = load_yaml_text(ref.read_text(encoding="utf-8"))
    return MappingProxyType(registry_from_file(f"infragen/catalog/data/{DATA_FILE}", data))


@functools.cache
def _names() -> Mapping[str, str]:
    """Lower-cased id or alias -> id."""
    out: dict[str, str] = {}
    for model_id, entry in load_model_registry().items():
        for name in (model_id, *entry.aliases):
            out[_key(name)] = model_id
    return MappingProxyType(out)


def _looks_like_path(ref: str) -> bool:
    return ref.endswith(".json") or os.sep in ref or "/" in ref


def resolve_model(
    ref: str | ModelArchitecture,
    *,
    base_dir: Path,
    where: str,
    registry: Mapping[str, ModelArchitecture] | None = None,
) -> ModelArchitecture:
    """A workload's `model` value -> its architecture.

    Registry id or alias (case-insensitive); a path to a Hugging Face `config.json` (relative to
    `base_dir`; anything ending in `.json`, or containing a path separator, that exists); or an
    explicit architecture, returned as is. Unknown names raise UnknownNameError naming `where`.
    `registry` is a test seam (defaults to the packaged registry).
    """
    if isinstance(ref, ModelArchitecture):
        return ref
    if registry is None:
        entries, names = load_model_registry(), _names()
    else:
        entries = registry
        names = {_key(n): mid for mid, e in registry.items() for n in (mid, *e.aliases)}
    hit = names.get(_key(ref))
    if hit is not None:
        return entries[hit]
    if _looks_like_path(ref):
        path = Path(ref).expanduser()
        if not path.is_absolute():
            path = base_dir / path
        if path.is_dir() and (path / "config.json").is_file():
            path = path / "config.json"
        if path.is_file():
            from infragen.catalog.hf_config import load_hf_config

            try:
                return load_hf_config(path)
            except InputError as exc:  # name the workload field too, not only the config file
                raise InputError(f"{where}: {exc.message}", fix=exc.fix, hint=exc.hint) from None
        if path.is_dir():
            raise InputError(f"{where}: {path} is a folder without a config.json; point at the config.json file")
        if ref.endswith(".json"):
            raise InputError(f"{where}: {ref!r} looks like a config.json path but {path} does not exist")
    # Suggest registry ids (27 names fit in the hint); aliases are for matching, ids for reading.
    raise UnknownNameError("model", ref, list(entries), where=where)
