"""Pinned engine versions and the flags each may be given (data in engines.yaml). Reads data only."""

from __future__ import annotations

from functools import cache
from importlib import resources

import yaml

VLLM_VERSION = "0.7.3"
LLAMA_CPP_VERSION = "b4600"


@cache
def load_engine_flags() -> dict[str, dict[str, frozenset[str]]]:
    """engine -> version -> allowed flags."""
    text = resources.files("infragen.catalog").joinpath("data/engines.yaml").read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    return {
        engine: {str(version): frozenset(entry["flags"]) for version, entry in versions.items()}
        for engine, versions in data["engines"].items()
    }
