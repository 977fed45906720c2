"""What the served checkpoint allows: its quantization decides the precision, and its blocks the tp degrees.

Pure: reads the workload, the model record and compat.yaml's rules; the search calls it per layout.
"""

from __future__ import annotations

from infragen.architecture import ModelArchitecture
from infragen.catalog.compat import TpCheck, tp_check
from infragen.catalog.records import Accelerator
from infragen.spec import WorkloadSpec


def serves_reference(spec: WorkloadSpec, model: ModelArchitecture) -> bool:
    """True when the checkpoint served is the one the model record describes (`weights` unset or that repo)."""
    return spec.weights is None or spec.weights == model.hf_repo


def block_fp8_problem(spec: WorkloadSpec, model: ModelArchitecture, precision: str) -> str | None:
    """A block-FP8 checkpoint (quantization_config) is loaded as fp8 whatever the precision: vLLM reads the method
    from the checkpoint, so planning it as bf16 would size twice the weights it loads."""
    if model.weight_block_size is None or precision == "fp8" or not serves_reference(spec, model):
        return None
    repo = spec.weights or model.hf_repo or model.id
    return (f"{repo} holds block-quantized FP8 weights (quantization_config weight_block_size "
            f"{list(model.weight_block_size)}): vLLM serves it as fp8, never as {precision}; allow fp8, or set "
            f"weights to a {precision} checkpoint")


def layout_tp_check(model: ModelArchitecture, precision: str, tp: int, acc: Accelerator | None) -> TpCheck:
    """compat.yaml tp_rules for one vLLM layout; the block rules apply when a block-FP8 record is served as fp8."""
    block = model.weight_block_size if precision == "fp8" else None
    return tp_check(model, tp, weight_block_size=block, acc=acc)
