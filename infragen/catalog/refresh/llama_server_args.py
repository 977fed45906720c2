"""Describe the pinned llama.cpp release from its source: `llama-server` options (common/arg.cpp) and the Hugging
Face architectures its GGUF converter knows (conversion/__init__.py TEXT_MODEL_MAP). Writes data/llama_cpp.yaml.

Run by a maintainer on an unpacked source tree, never at runtime:
    pip download --no-deps --no-binary :all: llama-cpp-python==0.3.36
    tar xzf llama_cpp_python-0.3.36.tar.gz
    python -m infragen.catalog.refresh.llama_server_args --source llama_cpp_python-0.3.36/vendor/llama.cpp \
        --tag b11312 --commit 0c1e57098bba43ac29e6e3b677cdceebdd22334f --established-by "..." \
        --out infragen/catalog/data
"""

from __future__ import annotations

import argparse
import ast
import re
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import yaml

#: a handler's signature decides how many values the option takes (common/arg.h constructors)
_HANDLER = re.compile(r"\[\]\s*\(\s*common_params\s*&\s*\w*\s*(?:,([^)]*))?\)")


def _calls(text: str, opener: str) -> Iterator[str]:
    """The full text of every `opener(...)` call, parentheses balanced outside string and char literals."""
    start = text.find(opener)
    while start != -1:
        depth, i, in_str = 0, start + len(opener) - 1, ""
        while i < len(text):
            ch = text[i]
            if in_str:
                if ch == "\\":
                    i += 1
                elif ch == in_str:
                    in_str = ""
            elif ch in "\"'":
                in_str = ch
            elif ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
                if depth == 0:
                    break
            i += 1
        yield text[start:i + 1]
        start = text.find(opener, i)


def _strings(braced: str) -> list[str]:
    return re.findall(r'"([^"]+)"', braced)


def parse_options(arg_cpp: str) -> list[dict[str, Any]]:
    """Options `llama-server` accepts: those of LLAMA_EXAMPLE_SERVER or COMMON, not excluded for the server."""
    found: dict[str, dict[str, Any]] = {}
    for call in _calls(arg_cpp, "add_opt("):
        lists = re.findall(r"\{\s*(\"[^{}]*?\")\s*\}", call.split("[]", 1)[0])
        if not lists:
            continue
        names = _strings(lists[0])
        negs = _strings(lists[1]) if len(lists) > 1 else []  # {"--jinja"}, {"--no-jinja"}
        examples = re.search(r"\.set_examples\(\{([^}]*)\}\)", call)
        excludes = re.search(r"\.set_excludes\(\{([^}]*)\}\)", call)
        ex = set(re.findall(r"LLAMA_EXAMPLE_\w+", examples.group(1))) if examples else {"LLAMA_EXAMPLE_COMMON"}
        if not ex & {"LLAMA_EXAMPLE_SERVER", "LLAMA_EXAMPLE_COMMON"}:
            continue
        if excludes and "LLAMA_EXAMPLE_SERVER" in excludes.group(1):
            continue
        if ".set_preset_only()" in call:
            continue
        handler = _HANDLER.search(call)
        params = (handler.group(1) or "") if handler else ""
        if not params.strip() or re.fullmatch(r"\s*bool\s*\w*\s*", params):
            arity, kind = 0, None
        elif params.count(",") == 1:
            arity, kind = 2, "str"
        else:
            arity, kind = 1, "int" if re.match(r"\s*int\b", params) else "str"
        entry: dict[str, Any] = {"names": sorted(set(names + negs), key=lambda s: (not s.startswith("--"), s)),
                                 "arity": arity}
        if kind:
            entry["value"] = kind
        key = entry["names"][0]
        if key in found:  # the same option declared per example (-np): keep one, names merged
            found[key]["names"] = sorted(set(found[key]["names"]) | set(entry["names"]),
                                         key=lambda s: (not s.startswith("--"), s))
        else:
            found[key] = entry
    return sorted(found.values(), key=lambda e: e["names"][0])


def parse_architectures(conversion_init: str) -> list[str]:
    """HF architecture names the converter maps to a text model (TEXT_MODEL_MAP keys)."""
    tree = ast.parse(conversion_init)
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) else None)
        if isinstance(target, ast.Name) and target.id == "TEXT_MODEL_MAP" and node.value is not None:
            return sorted(ast.literal_eval(node.value))
    raise SystemExit("TEXT_MODEL_MAP not found in conversion/__init__.py")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--source", type=Path, required=True, help="an unpacked llama.cpp source tree")
    parser.add_argument("--tag", required=True)
    parser.add_argument("--commit", required=True)
    parser.add_argument("--established-by", required=True, help="how the tag/commit of the tree was established")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    options = parse_options((args.source / "common" / "arg.cpp").read_text(encoding="utf-8"))
    archs = parse_architectures((args.source / "conversion" / "__init__.py").read_text(encoding="utf-8"))
    doc = {
        "schema_version": 1,
        "engine": "llama.cpp",
        "version": args.tag,
        "commit": args.commit,
        "as_of": date.today().isoformat(),
        "source": ("generated by infragen/catalog/refresh/llama_server_args.py from llama.cpp common/arg.cpp "
                   "(options of LLAMA_EXAMPLE_SERVER and COMMON; arity from each handler's signature) and "
                   "conversion/__init__.py TEXT_MODEL_MAP (architectures), at the commit below. "
                   + args.established_by),
        "architectures": archs,
        "options": options,
    }
    path = args.out / "llama_cpp.yaml"
    path.write_text("# Generated: do not edit (infragen/catalog/refresh/llama_server_args.py).\n"
                    + yaml.safe_dump(doc, sort_keys=False, width=120), encoding="utf-8")
    print(f"wrote {path}: {len(options)} options, {len(archs)} architectures")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
