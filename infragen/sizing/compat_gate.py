"""The compatibility gate: which (engine, precision, tp) a GPU and a checkpoint allow, before any estimate.

Pure: reads the workload, the model record and compat.yaml through infragen.catalog.compat. Each rejection names
the rule (as docs/compat-rules.md lists them) so an infeasible workload can say which rule to satisfy.
"""

from __future__ import annotations

from dataclasses import dataclass

from infragen.architecture import ModelArchitecture
from infragen.catalog.compat import (
    Checkpoint,
    TpCheck,
    architecture_problem,
    kernel_problem,
    tp_check,
    wheel_problem,
)
from infragen.catalog.records import Accelerator
from infragen.sizing.types import Hardware
from infragen.spec import PREQUANTIZED_PRECISIONS, VLLM_PRECISIONS, WorkloadSpec

#: Precisions a 16-bit checkpoint is served in without quantization.
SIXTEEN_BIT = frozenset({"bf16", "fp16"})
#: Rule names shown in rejections and exit-3 fixes (tp rules use their compat.yaml id).
CHECKPOINT, ARCHITECTURE, WHEEL, WEIGHT_KERNELS, KV_KERNELS = (
    "checkpoint method", "model architecture", "vLLM wheel", "weight kernels", "fp8 KV cache kernels")


@dataclass(frozen=True)
class Rejection:
    """One compat rule ruling out a layout."""

    rule: str
    reason: str


def layout_rejection(spec: WorkloadSpec, model: ModelArchitecture, hw: Hardware, *, engine: str, precision: str,
                     tp: int, expert_parallel: bool = False) -> Rejection | None:
    """The first compat rule that rules out serving `model` with `engine`/`precision`/`tp` on `hw` (None = allowed);
    `expert_parallel`: the layout's EP twin, whose experts no tp rule on an expert's slice binds."""
    acc = hw.accelerator
    why = checkpoint_problem(spec, engine, precision)
    if why:
        return Rejection(CHECKPOINT, why)
    why = architecture_problem(engine, model.family)
    if why:
        return Rejection(ARCHITECTURE, why)
    if engine != "vllm":
        return None
    if acc is not None:
        why = wheel_problem(acc)
        if why:
            return Rejection(WHEEL, why)
        why = kernel_problem(acc, "weights", precision)  # by compute capability
        if why is None and precision == "bf16" and acc.bf16_tflops is None:
            why = f"{acc.id} has no BF16 support; allow fp16 for it"
        if why:
            return Rejection(WEIGHT_KERNELS, why)
        why = kernel_problem(acc, "kv_cache", "fp8") if spec.kv_cache_dtype == "fp8" else None
        if why:
            return Rejection(KV_KERNELS, why)
    why = block_fp8_problem(spec, model, precision)
    if why:
        return Rejection(CHECKPOINT, why)
    check = layout_tp_check(model, precision, tp, acc, expert_parallel)
    return Rejection(check.rule or "tp", check.problem) if check.problem else None


def checkpoint_problem(spec: WorkloadSpec, engine: str, precision: str) -> str | None:
    """The weights repo decides the method: with a pre-quantized vLLM format listed, `weights` is that checkpoint,
    so another vLLM precision (fp8, bf16) would run `--quantization fp8` on an AWQ/GPTQ repo, which vLLM refuses."""
    held = [p for p in spec.precision if p in PREQUANTIZED_PRECISIONS and p in VLLM_PRECISIONS]
    if engine != "vllm" or spec.weights is None or not held or precision in held:
        return None
    return (f"weights {spec.weights} holds {held[0]} weights (precision lists {held[0]}): served as {held[0]}, "
            f"never as {precision}")


def serves_reference(spec: WorkloadSpec, model: ModelArchitecture) -> bool:
    """True when the checkpoint served is the one the model record describes (`weights` unset or that repo)."""
    return spec.weights is None or spec.weights == model.hf_repo


def checkpoint_kind(spec: WorkloadSpec, model: ModelArchitecture, precision: str) -> Checkpoint:
    """Whether the served checkpoint is already quantized (it has a quantization_config, which then decides vLLM's
    method) or holds 16-bit weights that vLLM quantizes at load. A given `weights` repo is an FP8 checkpoint when
    fp8 is listed without a 16-bit format, as a listed AWQ/GPTQ/INT8 format makes it that checkpoint."""
    if precision in PREQUANTIZED_PRECISIONS:
        return "quantized"
    if precision != "fp8":
        return "sixteen_bit"
    if serves_reference(spec, model):
        return "quantized" if model.weight_block_size is not None else "sixteen_bit"
    return "sixteen_bit" if any(p in SIXTEEN_BIT for p in spec.precision) else "quantized"


def block_fp8_problem(spec: WorkloadSpec, model: ModelArchitecture, precision: str) -> str | None:
    """A block-FP8 checkpoint (quantization_config) is loaded as fp8 whatever the precision: vLLM reads the method
    from the checkpoint, so planning it as bf16 would size twice the weights it loads."""
    if model.weight_block_size is None or precision == "fp8" or not serves_reference(spec, model):
        return None
    repo = spec.weights or model.hf_repo or model.id
    return (f"{repo} holds block-quantized FP8 weights (quantization_config weight_block_size "
            f"{list(model.weight_block_size)}): vLLM serves it as fp8, never as {precision}; allow fp8, or set "
            f"weights to a {precision} checkpoint")


def layout_tp_check(model: ModelArchitecture, precision: str, tp: int, acc: Accelerator | None,
                    expert_parallel: bool = False) -> TpCheck:
    """compat.yaml tp_rules for one vLLM layout; the block rules apply when a block-FP8 record is served as fp8."""
    block = model.weight_block_size if precision == "fp8" else None
    return tp_check(model, tp, weight_block_size=block, acc=acc, expert_parallel=expert_parallel)
