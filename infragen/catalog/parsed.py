"""YAML data files read through their pre-parsed JSON copies (`data/parsed.json`), keyed by the text's SHA-256.

Constructing Python objects from YAML costs far more than JSON even with libyaml's C parser, and `infragen plan`
reads eight data files. The YAML files stay the reviewed sources: a copy is used only when the file's text hashes to
the recorded digest, so an edited file is parsed as YAML (correct, just slower) until
`python -m infragen.catalog.compact` regenerates the copies; a test says when they are stale.
"""

from __future__ import annotations

import hashlib
import json
from functools import cache
from pathlib import Path
from typing import Any

import yaml

PARSED_FILE = "parsed.json"
_DATA = Path(__file__).parent / "data"
#: The data files the plan path reads, pre-parsed (catalog.json already covers the catalog's own files).
PREPARSED: tuple[str, ...] = ("compat.yaml", "engines.yaml", "llama_cpp.yaml", "load_balancers.yaml", "models.yaml",
                              "performance.yaml", "services.yaml", "vllm.yaml")
_FastLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def data_dir() -> Path:
    """The packaged data files, beside this module. Not importlib.resources: the package is installed as files (the
    loaders always read them as such), and importing importlib.resources (tempfile, shutil, zipfile, bz2, lzma)
    costs `infragen plan` about 3 % of its cold start (callgrind)."""
    return _DATA


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@cache
def _copies() -> dict[str, str]:
    """SHA-256 of a file's text -> the JSON text of its parse."""
    path = data_dir() / PARSED_FILE
    if not path.is_file():
        return {}
    files: dict[str, dict[str, str]] = json.loads(path.read_text(encoding="utf-8"))["files"]
    return {entry["sha256"]: entry["json"] for entry in files.values()}


def load_yaml_text(text: str) -> Any:
    """`text` parsed as YAML (safe types only), from the pre-parsed copy when one matches it byte for byte."""
    copy = _copies().get(digest(text))
    if copy is not None:
        return json.loads(copy)
    return yaml.load(text, Loader=_FastLoader)


def render_parsed(directory: Path | None = None) -> str:
    """The text of parsed.json: one line per file, `{"sha256": ..., "json": ...}` of its YAML parse.

    A file whose parse JSON cannot carry unchanged (dates, non-string keys, NaN) is left out and stays YAML-only.
    """
    root = directory or data_dir()
    lines = []
    for name in PREPARSED:
        path = root / name
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8")
        data = yaml.load(text, Loader=_FastLoader)
        try:
            dumped = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=_refuse)
        except ValueError:
            continue
        if json.loads(dumped) != data:
            continue
        entry = json.dumps({"sha256": digest(text), "json": dumped}, ensure_ascii=False)
        lines.append(f"  {json.dumps(name)}: {entry}")
    return ('{"generated_by": "python -m infragen.catalog.compact (from the YAML files next to this one; do not '
            'edit)",\n"files": {\n' + ",\n".join(lines) + "\n}}\n")


def _refuse(value: object) -> object:
    raise ValueError(f"not JSON: {value!r}")


def stale(directory: Path | None = None) -> list[str]:
    """Names of PREPARSED files whose copy is missing or no longer matches the file."""
    root = directory or data_dir()
    path = root / PARSED_FILE
    copies = json.loads(path.read_text(encoding="utf-8"))["files"] if path.is_file() else {}
    return [name for name in PREPARSED if (root / name).is_file()
            and copies.get(name, {}).get("sha256") != digest((root / name).read_text(encoding="utf-8"))]
