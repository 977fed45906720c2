"""The compatibility table (data/compat.yaml): which kernels run on which compute capability.

Reads data only; sizing, estimate and render ask it instead of comparing architecture names.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from infragen.catalog.engines import EngineRelease, pinned_release
from infragen.catalog.records import Accelerator
from infragen.errors import DataError

_FastLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_CC = r"^\d+\.\d+$"


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class KernelRule(_Record):
    """The GPUs on which vLLM has a kernel for one weight format or KV-cache type."""

    kind: Literal["weights", "kv_cache"]
    """`weights` (a precision, or `marlin` for the Marlin kernel family) or `kv_cache` (a KV-cache dtype)."""
    format: str
    """The precision / dtype the rule is about (`fp8`, `int4-awq`, `marlin`)."""
    min_compute_capability: str = Field(pattern=_CC)
    """Lowest NVIDIA compute capability with a kernel (`8.9`)."""
    amd_targets: list[str]
    """AMD LLVM targets with a kernel (`gfx942`); empty = none."""
    source: str
    """Where the rule was read."""


class ModelTypeRule(_Record):
    """Which architecture class an HF model_type is registered under in the engines."""

    model_type: str
    """HF `model_type` (the registry's `family`)."""
    hf_architecture: str
    """The HF `architectures` class name (`Qwen3MoeForCausalLM`)."""
    first_vllm: str | None
    """First vLLM release serving it, where a source says so (None = not recorded)."""
    source: str
    """Where the rule was read."""


class CompatTable(_Record):
    """The whole compatibility table."""

    schema_version: Literal[1]
    """Version of this file's format."""
    as_of: str
    """When the rules were last checked."""
    source: str
    """Where the rules come from (each rule names its own source)."""
    kernels: list[KernelRule]
    """vLLM kernels per weight format / KV-cache type."""
    model_types: list[ModelTypeRule]
    """HF model_type -> architecture class."""


def capability(text: str) -> tuple[int, int]:
    """`"8.9"` -> (8, 9), so capabilities compare as numbers (10.0 > 9.0)."""
    major, minor = text.split(".")
    return int(major), int(minor)


@cache
def load_compat() -> CompatTable:
    """The packaged compatibility table (cached)."""
    path = "data/compat.yaml"
    text = resources.files("infragen.catalog").joinpath(path).read_text(encoding="utf-8")
    try:
        return CompatTable.model_validate(yaml.load(text, Loader=_FastLoader))
    except ValidationError as exc:
        raise DataError(f"infragen/catalog/{path}: {exc}") from None


def kernel_problem(acc: Accelerator, kind: str, fmt: str, table: CompatTable | None = None, *,
                   unknown_ok: bool = False) -> str | None:
    """Why `acc` has no vLLM kernel for `fmt` (None when it has one, or when no rule names `fmt`).

    `unknown_ok`: a GPU without a compute capability passes (a user's hardware file for `estimate`); the planner
    never sets it, so an unidentified catalog GPU is never planned."""
    table = table or load_compat()
    rule = next((r for r in table.kernels if r.kind == kind and r.format == fmt), None)
    if rule is None:
        return None
    what = f"{fmt} weights" if kind == "weights" else f"an {fmt} KV cache"
    if acc.compute_capability is None:
        if unknown_ok:
            return None
        return f"{acc.id}: compute capability not in the catalog, so support for {what} cannot be checked"
    if acc.vendor == "amd":
        if acc.compute_capability in rule.amd_targets:
            return None
        return f"{acc.id} ({acc.compute_capability}) has no vLLM kernel for {what} (AMD targets: " \
               f"{', '.join(rule.amd_targets) or 'none'})"
    if not acc.compute_capability[0].isdigit():
        return f"{acc.id}: compute capability {acc.compute_capability} is not an NVIDIA one"
    if capability(acc.compute_capability) >= capability(rule.min_compute_capability):
        return None
    return (f"{acc.id} (compute capability {acc.compute_capability}) has no vLLM kernel for {what}: "
            f"needs {rule.min_compute_capability} or newer")


def wheel_problem(acc: Accelerator, release: EngineRelease | None = None) -> str | None:
    """Why the pinned vLLM wheel has no kernels for `acc` (its sm_ targets; `sm_100f` = every 10.x part)."""
    release = release or pinned_release("vllm")
    name = f"vLLM {release.version}"
    if acc.vendor != "nvidia":
        return f"{acc.id}: the {name} wheel on the package registry is built for NVIDIA CUDA only"
    if acc.compute_capability is None:
        return f"{acc.id}: compute capability not in the catalog, so the {name} wheel cannot be checked"
    major, minor = capability(acc.compute_capability)
    for target in release.cuda_targets:
        m = re.fullmatch(r"sm_(\d+)(\d)([af]?)", target)
        if m is None:
            continue
        t_major, t_minor, suffix = int(m.group(1)), int(m.group(2)), m.group(3)
        if (major, minor) == (t_major, t_minor) or (suffix == "f" and major == t_major and minor >= t_minor):
            return None
    return (f"{acc.id} (compute capability {acc.compute_capability}): the {name} wheel has kernels for "
            f"{', '.join(release.cuda_targets)} only")


def architecture_problem(engine: str, model_type: str, release: EngineRelease | None = None,
                         table: CompatTable | None = None, *, unknown_ok: bool = False) -> str | None:
    """Why the pinned `engine` release cannot serve models of `model_type` (None when it can). `unknown_ok`: a
    model_type without a row passes (`estimate` of an explicit architecture); the planner never sets it."""
    release = release or pinned_release(engine)
    table = table or load_compat()
    rule = next((r for r in table.model_types if r.model_type == model_type), None)
    if rule is None:
        if unknown_ok:
            return None
        return f"model_type {model_type!r} has no row in compat.yaml, so {engine} support cannot be checked"
    if rule.hf_architecture in release.architectures:
        return None
    first = f" (first served by vLLM {rule.first_vllm})" if engine == "vllm" and rule.first_vllm else ""
    return f"{engine} {release.version} does not serve {rule.hf_architecture}{first}"
