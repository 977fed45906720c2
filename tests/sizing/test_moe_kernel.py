"""The `vllm` profile prices routed experts with a timing of vLLM 0.34.0's fused-MoE kernel on an H200
(benchmarks/data/moe_kernel_h200, engines.vllm.moe_kernel): a fixed time per MoE layer plus the larger of reading
the touched experts and computing their padded tiles, added after the other GEMMs."""

from __future__ import annotations

import math
import statistics

import pytest

from benchmarks.moe_kernel_fit import kernel_rows, log_errors
from infragen.catalog import load_catalog
from infragen.catalog.models import load_model_registry
from infragen.sizing.constants import EngineConstants, load_constants
from infragen.sizing.performance import (
    elementwise_s,
    engine_constants,
    expert_read_fraction,
    gpu_figures,
    gpu_setup,
    linear_layers_s,
    moe_kernel_s,
    padded_expert_pairs,
    stage_step_s,
)
from tests.sizing.conftest import MIXTRAL


def _kernel():  # type: ignore[no-untyped-def]
    k = engine_constants("vllm").moe_kernel
    assert k is not None
    return k


def test_the_constants_reproduce_the_kernel_timing() -> None:
    rows = kernel_rows()
    assert len(rows) == 156 + 176  # the first run, and the rerun with 2048 - 16384 tokens for five shapes
    assert {r.tokens for r in rows if r.tokens > 1024} == {2048, 4096, 8192, 16384}
    errors = sorted(abs(math.expm1(e)) for e in log_errors(_kernel(), rows))
    assert statistics.median(errors) < 0.07
    assert errors[int(0.9 * len(errors))] < 0.16
    assert errors[-1] < 0.55
    prefill = sorted(abs(math.expm1(e)) for e, r in zip(log_errors(_kernel(), rows), rows, strict=True)
                     if r.tokens > 1024)
    assert statistics.median(prefill) < 0.2  # compute fractions fitted at <= 1024 tokens alone missed by 30 - 39 %


def test_the_fp8_rows_match_an_emulation_of_their_quantized_operands() -> None:
    """The GPU rerun checked the fp8-block kernel against float32 on the operands it was given (its own quantized
    activations, dequantized weights): bf16 output rounding only. Against unquantized activations the error is
    e4m3's ~4 %."""
    import csv

    from benchmarks.moe_kernel_fit import DATA

    fp8 = [r for r in csv.DictReader(DATA[1].open()) if r["dtype"] == "fp8-block" and r["rel_err_q"]]
    assert {r["case"] for r in fp8} == {"dsr1-tp8-fp8", "q235-tp4-fp8", "q30-tp1-fp8"} and len(fp8) == 12
    assert max(float(r["rel_err_q"]) for r in fp8) < 3e-3
    assert max(float(r["rel_err_gemm1_q"]) for r in fp8) < 3e-3
    assert min(float(r["rel_err"]) for r in fp8) > 0.03 and max(float(r["rel_err"]) for r in fp8) < 0.06


def test_the_intermediate_tensors_cost_bandwidth_per_routed_pair() -> None:
    """A layer writes and reads back its routed pairs' gate-up output (2N/tp), activation (N/tp) and per-expert
    output (hidden): 2 bytes x 2 x (3N/tp + hidden) a pair, at the kernel's read fraction."""
    arch = load_model_registry()["deepseek-r1"]
    s = gpu_setup(arch, gpu_figures(load_catalog().accelerator("h200-141gb")), "fp8", 65536.0, "vllm", 8, 1, 1)
    assert s.moe_activation_bytes_per_pair == pytest.approx(4 * (3 * 2048 / 8 + 7168))
    k = _kernel()
    base = moe_kernel_s(k, 58, 1e9, 1e12, 4.8e12, 1979e12, True)
    assert moe_kernel_s(k, 58, 1e9, 1e12, 4.8e12, 1979e12, True, activation_bytes=3e9) == pytest.approx(
        base + 3e9 / (4.8e12 * k.read_fraction))


def test_the_timing_is_latency_bound_at_one_token_per_expert() -> None:
    """DeepSeek-R1 tp8 fp8 reads its 8 touched experts at a fifth of the bandwidth: the fixed time dominates."""
    one = next(r for r in kernel_rows() if r.case == "dsr1-tp8-fp8" and r.tokens == 1)
    k = _kernel()
    bandwidth = load_catalog().accelerator("h200-141gb").memory_bandwidth_gb_per_s * 1e9
    assert one.touched_bytes / one.measured_s < 0.25 * bandwidth
    assert k.layer_fixed_us * 1e-6 > one.touched_bytes / (bandwidth * k.read_fraction)


def test_only_the_measured_engine_uses_the_kernel_and_each_engine_has_one_moe_model() -> None:
    engines = load_constants().engines
    assert engines["vllm"].moe_kernel is not None and engines["vllm"].moe_bandwidth_fraction is None
    for name in ("vllm-0.5", "tensorrt-llm"):  # fitted with the roofline's moe_bandwidth_fraction
        assert engines[name].moe_kernel is None and engines[name].moe_bandwidth_fraction is not None
    doc = engines["vllm"].model_dump()
    doc["moe_bandwidth_fraction"] = 0.5
    with pytest.raises(ValueError, match="exactly one"):
        EngineConstants.model_validate(doc)


@pytest.mark.parametrize(("model", "precision", "gpu", "tp"), [
    ("deepseek-r1", "fp8", "h200-141gb", 8), ("qwen3-235b-a22b", "bf16", "H100", 8), ("mixtral", "bf16", "H100", 2)])
def test_a_moe_step_is_the_dense_gemms_plus_the_kernel(model: str, precision: str, gpu: str, tp: int) -> None:
    arch = MIXTRAL if model == "mixtral" else load_model_registry()[model]
    s = gpu_setup(arch, gpu_figures(load_catalog().accelerator(gpu)), precision, 65536.0, "vllm", tp, 1, 1)
    e, k = engine_constants("vllm"), _kernel()
    for tokens in (1.0, 8.0, 300.0, 4096.0):
        routed = s.expert_bytes_gpu * s.num_experts / (s.num_experts + s.shared_experts)
        dense_compute = (s.dense_flops_per_token - s.expert_flops_per_pair * s.experts_per_token) * tokens / tp / (
            s.peak_flops * e.prefill_compute_fraction)
        dense_memory = (s.weight_bytes_dense_gpu + s.expert_bytes_gpu - routed) / (
            s.bandwidth_bytes_per_s * e.decode_bandwidth_fraction)
        moe = moe_kernel_s(k, s.moe_layers_stage, routed * expert_read_fraction(s.num_experts, s.experts_per_token,
                                                                                tokens),
                           s.expert_flops_per_pair * padded_expert_pairs(s, tokens) / tp, s.bandwidth_bytes_per_s,
                           s.peak_flops, s.fp8_tensor_math,
                           activation_bytes=tokens * s.experts_per_token * s.moe_activation_bytes_per_pair
                           * s.moe_layers_stage)
        # no context and no prompt: no attention; what is left is the all-reduces and the host costs
        ring = 2.0 * (tp - 1) / tp * tokens * s.hidden_size * s.activation_bytes / s.link_bytes_per_s
        rest = 2 * s.num_layers * (ring + s.allreduce_latency_s) + e.step_overhead_ms * 1e-3 + \
            e.per_seq_overhead_ms * 1e-3 * tokens + e.per_layer_overhead_us * 1e-6 * s.num_layers
        dense = max(dense_compute, dense_memory)
        if s.linears_measured:  # 16-bit / per-tensor fp8 dense linears: the measured linear kernel (ttft, 2026-12-04)
            dense = linear_layers_s(e.linear_kernel, s.linears_stage, s.weight_bytes_dense_gpu + s.expert_bytes_gpu
                                    - routed, dense_compute * s.peak_flops * e.prefill_compute_fraction,
                                    s.bandwidth_bytes_per_s, s.peak_flops, s.fp8_tensor_math)
        # the router, small kernels and norms of the MoE layers: tests/sizing/test_moe_layer_ops.py
        layer_ops = s.moe_layer_ops_fixed_s + tokens * s.moe_layer_ops_s_per_token
        assert stage_step_s(s, tokens, 0.0, 0.0, 0.0) == pytest.approx(
            max(dense, s.block_fp8_linear_floor_s) + moe + layer_ops + rest)
        assert moe >= s.moe_layers_stage * k.layer_fixed_us * 1e-6
    assert s.fp8_tensor_math == (precision == "fp8")
    assert s.moe_layers_stage == (58 if model == "deepseek-r1" else arch.num_layers)


def test_moe_time_grows_with_the_batch_and_fp8_halves_the_bytes() -> None:
    arch = load_model_registry()["qwen3-235b-a22b"]
    acc = gpu_figures(load_catalog().accelerator("H100"))
    bf16 = gpu_setup(arch, acc, "bf16", 65536.0, "vllm", 8, 1, 1)
    fp8 = gpu_setup(arch, acc, "fp8", 65536.0, "vllm", 8, 1, 1)
    steps = [stage_step_s(bf16, t, 0.0, 0.0, 0.0) for t in (1.0, 4.0, 16.0, 64.0, 512.0, 4096.0)]
    assert steps == sorted(steps)
    assert fp8.expert_bytes_gpu == pytest.approx(bf16.expert_bytes_gpu / 2)
    assert stage_step_s(fp8, 64.0, 0.0, 0.0, 0.0) < stage_step_s(bf16, 64.0, 0.0, 0.0, 0.0)


def test_dense_models_do_not_touch_the_moe_terms() -> None:
    from tests.sizing.conftest import LLAMA3_8B

    s = gpu_setup(LLAMA3_8B, gpu_figures(load_catalog().accelerator("H100")), "bf16", 131072.0, "vllm", 1, 1, 1)
    assert s.num_experts == 0 and s.moe_layers_stage == 0.0
    e = engine_constants("vllm")
    assert e.linear_kernel is not None  # bf16 dense linears: the measured linear kernel (ttft, 2026-12-04)
    gemm = linear_layers_s(e.linear_kernel, s.linears_stage, s.weight_bytes_dense_gpu, s.dense_flops_per_token * 8,
                           s.bandwidth_bytes_per_s, s.peak_flops, False)
    assert e.layer_ops is not None  # a dense layer's elementwise ops (ttft, 2026-12-04; test_layer_ops.py)
    gemm += elementwise_s(e.layer_ops, tuple(8 * b for b in s.layer_ops_bytes_per_token), s.bandwidth_bytes_per_s)
    host = e.step_overhead_ms * 1e-3 + e.per_seq_overhead_ms * 1e-3 * 8 + e.per_layer_overhead_us * 1e-6 * 32
    assert stage_step_s(s, 8.0, 0.0, 0.0, 0.0) == pytest.approx(gemm + host)


def test_block_fp8_linears_have_a_k_serial_floor() -> None:
    """A block-quantized fp8 checkpoint's dense linears (vLLM's w8a8 block kernel with its per-token-group quant)
    take fixed + per_k x K each at decode batches, measured at DeepSeek-R1 tp8's shapes on the H200
    (block_fp8_dense_h200.csv), far above their bytes: the step's dense GEMMs take the larger of the roofline and
    the floor, over MLA's fused q/kv down-projection, q up-projection and o_proj, the shared expert's two linears
    (MoE layers) and the MLP's two (the first dense layers)."""
    arch = load_model_registry()["deepseek-r1"]
    acc = gpu_figures(load_catalog().accelerator("h200-141gb"))
    s = gpu_setup(arch, acc, "fp8", 65536.0, "vllm", 8, 1, 1)
    b = engine_constants("vllm").block_fp8_linear
    assert b is not None

    def lin(k: int) -> float:
        return (b.fixed_us + b.per_k_ns * 1e-3 * k) * 1e-6

    attn = lin(7168) + lin(1536) + lin(128 * 128 // 8)
    moe_layer = attn + lin(7168) + lin(2048 // 8)
    dense_layer = attn + lin(7168) + lin(18432 // 8)
    assert s.block_fp8_linear_floor_s == pytest.approx(58 * moe_layer + 3 * dense_layer)
    e = engine_constants("vllm")
    routed = s.expert_bytes_gpu * s.num_experts / (s.num_experts + s.shared_experts)
    roofline = (s.weight_bytes_dense_gpu + s.expert_bytes_gpu - routed) / (
        s.bandwidth_bytes_per_s * e.decode_bandwidth_fraction)
    assert s.block_fp8_linear_floor_s > 4 * roofline  # batch 4: ~5 ms of linears against 0.7 ms of bytes
    # not for 16-bit weights, per-tensor fp8 (no weight_block_size), GPUs without fp8 tensor cores, other engines
    assert gpu_setup(arch, acc, "bf16", 65536.0, "vllm", 8, 1, 1).block_fp8_linear_floor_s == 0.0
    qwen = load_model_registry()["qwen3-235b-a22b"]
    assert gpu_setup(qwen, acc, "fp8", 65536.0, "vllm", 8, 1, 1).block_fp8_linear_floor_s == 0.0
    a100 = gpu_figures(load_catalog().accelerator("a100-80gb"))
    assert gpu_setup(arch, a100, "fp8", 65536.0, "vllm", 16, 1, 2).block_fp8_linear_floor_s == 0.0
    assert gpu_setup(arch, acc, "fp8", 65536.0, "vllm-0.5", 8, 1, 1).block_fp8_linear_floor_s == 0.0


def test_the_block_fp8_floor_reproduces_its_timing() -> None:
    import csv

    from benchmarks.moe_kernel_fit import DATA

    b = engine_constants("vllm").block_fp8_linear
    assert b is not None
    rows = [r for r in csv.DictReader((DATA[0].parent / "block_fp8_dense_h200.csv").open())
            if r["case"].startswith("bf8-") and int(r["M"]) <= 64]
    assert len(rows) == 56
    errors = sorted(abs(b.fixed_us + b.per_k_ns * 1e-3 * int(r["K"]) - float(r["linear_us"])) / float(r["linear_us"])
                    for r in rows)
    assert statistics.median(errors) < 0.12 and errors[-1] < 0.45
