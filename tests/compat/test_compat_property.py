"""Exhaustive over the model registry x vLLM precisions x KV dtypes x catalog GPUs x tp: whatever the planner's
gate (`compat_gate.layout_rejection`) or `estimate_memory` accepts obeys every compat rule, checked here from
compat.yaml's own numbers, and renders a `vllm serve` argv the pinned release's parser accepts (the option data)."""

from __future__ import annotations

import math
from functools import cache

from infragen.architecture import ModelArchitecture
from infragen.catalog import load_catalog
from infragen.catalog.compat import capability, load_compat, shard_widths
from infragen.catalog.engines import argv_problems, pinned_release
from infragen.catalog.models import load_model_registry
from infragen.catalog.records import Accelerator
from infragen.sizing import engine_args, estimate_memory, hardware_from_gpu
from infragen.sizing.compat_gate import checkpoint_kind, layout_rejection
from infragen.spec import PREQUANTIZED_PRECISIONS, VLLM_PRECISIONS, WorkloadSpec

TPS = (1, 2, 4, 8)
KV_DTYPES = ("auto", "fp8")


def _spec(model: ModelArchitecture, precision: str, kv: str) -> WorkloadSpec:
    weights = f"org/{model.id}-{precision}" if precision in PREQUANTIZED_PRECISIONS else None
    return WorkloadSpec.model_validate({
        "model": model.id, "precision": [precision], "weights": weights, "kv_cache_dtype": kv,
        "traffic": {"concurrent_users": 4, "prompt_tokens": 512, "output_tokens": 128}, "cloud": "aws"})


def _independent_rules(model: ModelArchitecture, precision: str, kv: str, acc: Accelerator, tp: int) -> list[str]:
    """compat.yaml re-read with plain arithmetic: what a legal combination must satisfy."""
    table = load_compat()
    broken: list[str] = []
    arch = next(r.hf_architecture for r in table.model_types if r.model_type == model.family)
    if arch not in pinned_release("vllm").architectures:
        broken.append("architecture")
    cc = acc.compute_capability
    if acc.vendor != "nvidia" or cc is None:
        broken.append("wheel")  # the pinned wheel is CUDA-only and needs a known capability
    for kind, fmt in (("weights", precision), ("kv_cache", "fp8" if kv == "fp8" else None)):
        rule = next((r for r in table.kernels if r.kind == kind and r.format == fmt), None)
        if rule and cc and acc.vendor == "nvidia" and capability(cc) < capability(rule.min_compute_capability):
            broken.append(f"{kind} {fmt}")
    widths = shard_widths(model)
    block = model.weight_block_size if precision == "fp8" else None
    for rule in table.tp_rules:
        width = widths[rule.width]
        if width is None:
            continue
        if rule.multiple_of == "one":
            if width % tp and not (rule.replicate and tp % width == 0):
                broken.append(rule.id)
        elif block and tp > 1 and width % tp == 0:
            shard = width // tp
            need = [block[1]] if rule.multiple_of == "block_k" else list(block)
            refine = math.gcd(*block, shard, model.hidden_size)
            refinable = (rule.refine_min is not None and refine >= rule.refine_min and cc is not None
                         and capability(cc) >= capability(rule.refine_min_compute_capability or "0.0"))
            if any(shard % b for b in need) and not refinable:
                broken.append(rule.id)
    return broken


@cache
def _argv(model_id: str, precision: str, kv: str, tp: int) -> tuple[str, ...]:
    model = load_model_registry()[model_id]
    mml = min(model.max_position_embeddings, 8192)
    return tuple(engine_args.vllm_argv(
        weights=model.hf_repo or model.id, served_name=model.id, port=8000, tp=tp, pp=1, max_model_len=mml,
        max_num_seqs=64, gpu_memory_utilization=0.9, precision=precision,
        checkpoint=checkpoint_kind(_spec(model, precision, kv), model, precision), kv_cache_dtype=kv, multi_node=False,
        model=model))


def test_every_combination_the_planner_accepts_obeys_the_table_and_renders_a_valid_argv() -> None:
    catalog = load_catalog()
    gpus = [a for a in catalog.accelerators.values()]
    accepted = rejected = 0
    for model in load_model_registry().values():
        for precision in sorted(VLLM_PRECISIONS):
            for kv in KV_DTYPES:
                spec = _spec(model, precision, kv)
                for acc in gpus:
                    hw = hardware_from_gpu(acc, 8)
                    for tp in TPS:
                        if layout_rejection(spec, model, hw, engine="vllm", precision=precision, tp=tp):
                            rejected += 1
                            continue
                        accepted += 1
                        assert _independent_rules(model, precision, kv, acc, tp) == [], (model.id, precision, kv,
                                                                                         acc.id, tp)
                        assert argv_problems("vllm", list(_argv(model.id, precision, kv, tp))) == []
    assert accepted > 1000 and rejected > 1000  # both sides are exercised


def test_every_layout_estimate_memory_accepts_obeys_the_table() -> None:
    catalog = load_catalog()
    for model in load_model_registry().values():
        for precision in ("bf16", "fp8"):
            # a GPU without a compute capability is taken at its word by `estimate` (a user's hardware file)
            for acc in (a for a in catalog.accelerators.values() if a.compute_capability is not None):
                hw = hardware_from_gpu(acc, 8)
                for tp in TPS:
                    mem = estimate_memory(model, hw, precision=precision, tp=tp, max_model_len=2048)
                    if mem.fits:
                        broken = [b for b in _independent_rules(model, precision, "auto", acc, tp)
                                  if b != "architecture"]  # estimate takes an unlisted model_type at its word
                        assert broken == [], (model.id, precision, acc.id, tp, broken)
