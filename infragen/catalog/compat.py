"""The compatibility table (data/compat.yaml): which kernels run on which compute capability.

Reads data only; sizing, estimate and render ask it instead of comparing architecture names.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from infragen.architecture import ModelArchitecture
from infragen.catalog.engines import EngineRelease, pinned_release
from infragen.catalog.parsed import data_dir, load_yaml_text
from infragen.catalog.records import Accelerator
from infragen.errors import DataError

_CC = r"^\d+\.\d+$"


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


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


Checkpoint = Literal["sixteen_bit", "quantized"]


class QuantizationFlag(_Record):
    """The `vllm serve --quantization` value for one precision served from one kind of checkpoint."""

    precision: str
    """The planned weight format (`fp8`, `int4-awq`)."""
    checkpoint: Checkpoint
    """`sixteen_bit` (vLLM quantizes at load) or `quantized` (the checkpoint has a quantization_config)."""
    flag: str | None
    """The `--quantization` value; None = no flag (the checkpoint's quantization_config decides)."""
    source: str
    """Where the rule was read."""


ShardWidth = Literal["attention_heads", "kv_heads", "vocab_padded", "dense_mlp", "experts", "shared_experts",
                     "attention_output"]


class TpRule(_Record):
    """What each tensor-parallel rank's shard of one model width must be a multiple of."""

    id: str
    """Short name shown in rejections and docs (`fp8-block-experts`)."""
    width: ShardWidth
    """The sharded quantity (see `shard_widths`); a model without it (no experts) is not constrained."""
    applies: Literal["always", "block_fp8"]
    """`always`, or only when a block-quantized FP8 checkpoint is served as fp8."""
    multiple_of: Literal["one", "block_k", "block_n_and_k"]
    """`one`: tp divides the width; `block_k` / `block_n_and_k`: the shard (width / tp) is a whole number of the
    checkpoint's weight_block_size[1] (and [0]); block rules bind only at tp > 1."""
    replicate: bool = False
    """With tp >= width, tp must be a multiple of it instead (vLLM replicates KV heads)."""
    refine_min: int | None = None
    """A misaligned shard still loads when gcd(block_n, block_k, shard, hidden_size) is at least this (vLLM refines
    the block scales); None = no refinement."""
    refine_min_compute_capability: str | None = Field(default=None, pattern=_CC)
    """Lowest NVIDIA compute capability whose kernels consume refined blocks."""
    suggest: str | None = None
    """What else would serve the model when the rule refuses a tp (shown with the refusal); None = nothing."""
    lifted_by_expert_parallel: bool = False
    """The width is a routed expert's, which expert parallelism does not slice (each GPU holds whole experts):
    the rule does not bind a layout served with --enable-expert-parallel."""
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
    quantization_flags: list[QuantizationFlag]
    """`--quantization` per precision and checkpoint kind."""
    model_types: list[ModelTypeRule]
    """HF model_type -> architecture class."""
    tp_rules: list[TpRule]
    """Tensor-parallel divisibility rules."""


@cache
def capability(text: str) -> tuple[int, int]:
    """`"8.9"` -> (8, 9), so capabilities compare as numbers (10.0 > 9.0)."""
    major, minor = text.split(".")
    return int(major), int(minor)


@cache
def load_compat() -> CompatTable:
    """The packaged compatibility table (cached)."""
    path = "data/compat.yaml"
    text = (data_dir() / "compat.yaml").read_text(encoding="utf-8")
    try:
        return CompatTable.model_validate(load_yaml_text(text))
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


def quantization_flag(precision: str, checkpoint: Checkpoint, table: CompatTable | None = None) -> str | None:
    """`--quantization` for serving `precision` from a `checkpoint` of that kind; None = no flag. A 16-bit format
    from a 16-bit checkpoint needs none; any other pair must have a rule, so a new format cannot fall through to a
    flag vLLM would refuse."""
    table = table or load_compat()
    rule = next((r for r in table.quantization_flags if r.precision == precision and r.checkpoint == checkpoint),
                None)
    if rule is not None:
        return rule.flag
    if checkpoint == "sixteen_bit" and precision in {"bf16", "fp16"}:
        return None
    raise DataError(f"infragen/catalog/data/compat.yaml: no quantization_flags rule for {precision} served from a "
                    f"{checkpoint} checkpoint")


def wheel_problem(acc: Accelerator, release: EngineRelease | None = None) -> str | None:
    """Why the pinned vLLM wheel has no kernels for `acc` (its sm_ targets; `sm_100f` = every 10.x part)."""
    release = release or pinned_release("vllm")
    return _wheel_problem(acc.id, acc.vendor, acc.compute_capability, release.version, tuple(release.cuda_targets))


@cache  # asked once per candidate layout by the search; the answer depends on these five values only
def _wheel_problem(acc_id: str, vendor: str, compute_capability: str | None, version: str,
                   cuda_targets: tuple[str, ...]) -> str | None:
    name = f"vLLM {version}"
    if vendor != "nvidia":
        return f"{acc_id}: the {name} wheel on the package registry is built for NVIDIA CUDA only"
    if compute_capability is None:
        return f"{acc_id}: compute capability not in the catalog, so the {name} wheel cannot be checked"
    major, minor = capability(compute_capability)
    for target in cuda_targets:
        m = re.fullmatch(r"sm_(\d+)(\d)([af]?)", target)
        if m is None:
            continue
        t_major, t_minor, suffix = int(m.group(1)), int(m.group(2)), m.group(3)
        if (major, minor) == (t_major, t_minor) or (suffix == "f" and major == t_major and minor >= t_minor):
            return None
    return (f"{acc_id} (compute capability {compute_capability}): the {name} wheel has kernels for "
            f"{', '.join(cuda_targets)} only")


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


#: vLLM pads the vocabulary to a multiple of this before sharding it (vocab_parallel_embedding.py).
VOCAB_PADDING = 64


def shard_widths(model: ModelArchitecture) -> dict[str, int | None]:
    """The widths vLLM shards over tp ranks, as the rules in compat.yaml name them (None = the model has none)."""
    expert = (model.moe_intermediate_size or model.intermediate_size) if model.is_moe else None
    head_out = (model.v_head_dim or model.head_dim_resolved) if model.is_mla else model.head_dim_resolved
    return {
        "attention_heads": model.num_attention_heads,
        "kv_heads": None if model.is_mla else model.kv_heads,  # MLA has one latent KV, not split over heads
        "vocab_padded": -(-model.vocab_size // VOCAB_PADDING) * VOCAB_PADDING,
        "dense_mlp": model.intermediate_size if model.dense_layers else None,
        "experts": expert,
        "shared_experts": expert * model.num_shared_experts if expert and model.num_shared_experts else None,
        "attention_output": model.num_attention_heads * head_out,
    }


@dataclass(frozen=True)
class TpCheck:
    """The verdict on one tp degree: the first rule it breaks (None = legal), and notes on how it loads."""

    problem: str | None
    notes: tuple[str, ...] = ()
    rule: str | None = None
    """The id of the rule broken (None = legal)."""


def tp_check(model: ModelArchitecture, tp: int, *, weight_block_size: tuple[int, int] | None = None,
             acc: Accelerator | None = None, table: CompatTable | None = None,
             expert_parallel: bool = False) -> TpCheck:
    """Whether vLLM can shard `model` over `tp` ranks. `weight_block_size`: the served checkpoint is block-FP8
    (block rules apply); `acc`: the GPU (refined blocks need its compute capability); `expert_parallel`: served
    with --enable-expert-parallel, so the rules on a routed expert's slice do not apply (lifted_by_expert_parallel)."""
    table = table or load_compat()
    widths = shard_widths(model)
    notes: list[str] = []
    for rule in table.tp_rules:
        width = widths[rule.width]
        if width is None or (rule.applies == "block_fp8" and weight_block_size is None):
            continue
        if expert_parallel and rule.lifted_by_expert_parallel and tp > 1:
            continue
        if rule.multiple_of == "one":
            ok = width % tp == 0 or (rule.replicate and tp % width == 0)
            if not ok:
                return TpCheck(f"{rule.id}: {rule.width.replace('_', ' ')} {width} cannot be split over tp {tp}"
                               + (f" (nor replicated: {tp} is not a multiple of {width})" if rule.replicate else ""),
                               tuple(notes), rule.id)
            continue
        assert weight_block_size is not None
        if tp == 1 or width % tp:
            continue  # block rules bind on shards; an uneven split is the `one` rule's to report
        block_n, block_k = weight_block_size
        shard = width // tp
        blocks = (block_k,) if rule.multiple_of == "block_k" else (block_n, block_k)
        if all(shard % b == 0 for b in blocks):
            continue
        refined = math.gcd(block_n, block_k, shard, model.hidden_size)
        if rule.refine_min is not None and refined >= rule.refine_min and _refines(acc, rule):
            notes.append(f"{rule.id}: FP8 block {block_n}x{block_k} does not divide {shard} (the tp {tp} shard of "
                         f"{rule.width.replace('_', ' ')} {width}); vLLM refines the scales to {refined}x{refined} "
                         "and runs the Triton FP8 MoE kernels")
            continue
        why = f"FP8 block {'x'.join(str(b) for b in blocks)} does not divide {shard} at tp {tp}"
        if rule.refine_min is not None:
            why += (f" (vLLM refines blocks down to {rule.refine_min} only on compute capability "
                    f"{rule.refine_min_compute_capability}+; gcd here is {refined})")
        if rule.suggest:
            why += f"; {rule.suggest}"
        return TpCheck(f"{rule.id}: {why} ({rule.width.replace('_', ' ')} {width})", tuple(notes), rule.id)
    return TpCheck(None, tuple(notes))


def _refines(acc: Accelerator | None, rule: TpRule) -> bool:
    """Refined block scales need the Triton FP8 kernels: an NVIDIA GPU of the rule's compute capability or newer
    (the pinned wheel is NVIDIA-only, wheel_problem)."""
    if acc is None or acc.vendor != "nvidia" or acc.compute_capability is None:
        return False
    need = rule.refine_min_compute_capability
    return need is None or capability(acc.compute_capability) >= capability(need)
