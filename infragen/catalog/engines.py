"""Pinned engine releases (engines.yaml) and what each accepts, generated from the release itself (vllm.yaml,
llama_cpp.yaml): options with their arity, value kinds and choices, served architectures. Reads data only."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from typing import Any

from infragen.catalog.parsed import data_dir, load_yaml_text
from infragen.errors import DataError
from infragen.identifiers import COMPILER_FLAG_PATTERN

ENGINES = ("vllm", "llama.cpp")


def _load(name: str) -> dict[str, Any]:
    text = (data_dir() / name).read_text(encoding="utf-8")
    data: dict[str, Any] = load_yaml_text(text)
    return data


@dataclass(frozen=True)
class SourceArchive:
    """The release's source as a PyPI source distribution (llama.cpp: the tree llama-cpp-python vendors)."""

    package: str
    version: str
    file: str
    """File name on the index (`llama_cpp_python-0.3.36.tar.gz`)."""
    sha256: str
    tree: str
    """Directory inside the archive that holds the engine's source (its CMakeLists.txt)."""
    source: str


@dataclass(frozen=True)
class EngineRelease:
    """One pinned release and what its own parser / registry accepts."""

    engine: str
    version: str
    commit: str | None
    source: str
    options: dict[str, dict[str, Any]]  # every name (and alias) -> {arity, value, choices}
    values: dict[str, frozenset[str]]  # values checked after parsing (--quantization, --kv-cache-dtype)
    architectures: frozenset[str]  # HF architecture classes served (llama.cpp: its GGUF converter knows)
    cuda_targets: tuple[str, ...]  # sm_ targets the wheel ships kernels for (vLLM only)
    described_by: str
    sdist: SourceArchive | None = None  # the same source on PyPI, for nodes that build it without its git host
    build_cflags: tuple[str, ...] = ()
    """Compiler flags a node builds the source with beside -march=native (engines.yaml, with why)."""


@cache
def pinned_release(engine: str) -> EngineRelease:
    """The pinned release of `engine` (vllm or llama.cpp), with its generated description."""
    pins = _load("engines.yaml")["engines"]
    if engine not in pins:
        raise DataError(f"infragen/catalog/data/engines.yaml: no pin for engine {engine!r}")
    pin = pins[engine]
    desc = _load(pin["description"])
    if str(desc["version"]) != str(pin["version"]):
        raise DataError(f"infragen/catalog/data/{pin['description']} describes {engine} {desc['version']}, but "
                        f"engines.yaml pins {pin['version']}: regenerate it (docs/engines.md)")
    options = {name: opt for opt in desc["options"] for name in opt["names"]}
    return EngineRelease(
        engine=engine, version=str(pin["version"]), commit=pin.get("commit"), source=pin["source"], options=options,
        values={k: frozenset(v) for k, v in (desc.get("values") or {}).items()},
        architectures=frozenset(desc.get("architectures") or ()), cuda_targets=tuple(desc.get("cuda_targets") or ()),
        described_by=pin["description"],
        sdist=SourceArchive(**{k: str(v) for k, v in pin["sdist"].items()}) if pin.get("sdist") else None,
        build_cflags=_build_cflags(engine, pin))


def _build_cflags(engine: str, pin: dict[str, Any]) -> tuple[str, ...]:
    """engines.yaml `<engine>.build_cflags`: machine options only, and each set with the reason it is there."""
    flags = tuple(str(f) for f in pin.get("build_cflags") or ())
    if flags and not str(pin.get("build_cflags_source", "")).strip():
        raise DataError(f"infragen/catalog/data/engines.yaml: {engine} build_cflags need build_cflags_source (why)")
    bad = [f for f in flags if not re.fullmatch(COMPILER_FLAG_PATTERN, f)]
    if bad:
        raise DataError(f"infragen/catalog/data/engines.yaml: {engine} build_cflags {bad} are not machine options "
                        "(-m... / -mno-...)")
    return flags


@dataclass(frozen=True)
class ExpertParallelSupport:
    """How the pinned release turns on expert parallelism for MoE models, and when the planner uses it."""

    flag: str
    """The option (`--enable-expert-parallel`), present in the release's parser description."""
    only_where_tp_refused: bool
    """The planner plans a layout's expert-parallel twin only where plain tp of it is refused by a rule EP lifts
    (compat.yaml lifted_by_expert_parallel), as the measured EP / tp pairs ask (`evidence`)."""
    evidence: str
    """Why (the measurements), shown with the rejection of an EP twin."""


@cache
def expert_parallel_support(engine: str) -> ExpertParallelSupport | None:
    """engines.yaml `<engine>.expert_parallel`, its flag checked against the pinned release's own parser
    description; None where the engine has none."""
    pins = _load("engines.yaml")["engines"]
    ep = (pins.get(engine) or {}).get("expert_parallel")
    if not ep:
        return None
    flag = str(ep["flag"])
    if flag not in pinned_release(engine).options:
        raise DataError(f"infragen/catalog/data/engines.yaml: {engine} expert_parallel.flag {flag} is not an option "
                        f"of the pinned release ({pinned_release(engine).described_by})")
    return ExpertParallelSupport(flag, bool(ep.get("plan_only_where_tp_refused", False)),
                                 " ".join(str(ep.get("plan_evidence", "")).split()))


def expert_parallel_flag(engine: str) -> str | None:
    """The option of the pinned `engine` release that turns on expert parallelism; None where it has none."""
    support = expert_parallel_support(engine)
    return support.flag if support else None


def pinned_version(engine: str) -> str:
    """The version string of the pinned release."""
    return pinned_release(engine).version


def _value_problem(name: str, value: str, opt: dict[str, Any], release: EngineRelease) -> str | None:
    kind = opt.get("value", "str")
    try:
        if kind == "int":
            int(value)
        elif kind == "float":
            float(value)
        elif kind == "json" or (kind == "json-or-str" and value.lstrip().startswith("{")):
            json.loads(value)
    except ValueError:
        return f"{name} {value!r} is not a valid {kind}"
    if opt.get("choices") and value not in opt["choices"]:
        return f"{name} {value!r} is not one of {', '.join(opt['choices'])}"
    allowed = release.values.get(name) or next(
        (release.values[n] for n in opt["names"] if n in release.values), None)
    if allowed is not None and value not in allowed:
        return f"{name} {value!r} is not accepted by {release.engine} {release.version}"
    return None


def argv_problems(engine: str, argv: list[str], release: EngineRelease | None = None) -> list[str]:
    """What the pinned release's parser would refuse in `argv` (empty = accepted): unknown options, missing or
    extra values, values of the wrong kind or outside the choices. argv starts with the program (and `serve`)."""
    release = release or pinned_release(engine)
    words = argv[2:] if engine == "vllm" else argv[1:]
    problems: list[str] = []
    positional = 0
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if not word.startswith("-"):
            positional += 1
            if engine != "vllm" or positional > 1:  # `vllm serve` takes one positional: the model
                problems.append(f"unexpected argument {word!r}")
            continue
        name, eq, inline = word.partition("=")
        opt = release.options.get(name)
        if opt is None:
            problems.append(f"{name} is not an option of {release.engine} {release.version}")
            continue
        arity = opt["arity"]
        if arity == 0:
            if eq:
                problems.append(f"{name} takes no value")
            continue
        values = [inline] if eq else []
        if not eq:
            want = 1 if arity in ("?", "+") else int(arity) if arity != "*" else 0
            while i < len(words) and not words[i].startswith("-") and (len(values) < want or arity in ("+", "*")):
                values.append(words[i])
                i += 1
            if len(values) < want and arity != "?":
                problems.append(f"{name} needs {want} value(s)")
                continue
        problems += [p for v in values if (p := _value_problem(name, v, opt, release))]
    return problems


def __getattr__(name: str) -> str:
    """`VLLM_VERSION` / `LLAMA_CPP_VERSION`: the pins, read from engines.yaml when first asked (not at import)."""
    pins = {"VLLM_VERSION": "vllm", "LLAMA_CPP_VERSION": "llama.cpp"}
    if name in pins:
        return pinned_version(pins[name])
    raise AttributeError(name)
