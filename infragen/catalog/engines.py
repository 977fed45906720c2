"""Pinned engine versions and the flags each may be given (data in engines.yaml). Reads data only."""

from __future__ import annotations

from functools import cache
from importlib import resources

import yaml

#: libyaml's C parser when present (5-10x faster on the catalog files), else the pure-Python one.
_FastLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

VLLM_VERSION = "0.7.3"
LLAMA_CPP_VERSION = "b4600"


@cache
def load_engine_flags() -> dict[str, dict[str, frozenset[str]]]:
    """engine -> version -> allowed flags."""
    text = resources.files("infragen.catalog").joinpath("data/engines.yaml").read_text(encoding="utf-8")
    data = yaml.load(text, Loader=_FastLoader)
    return {
        engine: {str(version): frozenset(entry["flags"]) for version, entry in versions.items()}
        for engine, versions in data["engines"].items()
    }
