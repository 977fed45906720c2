"""Dense linears priced by a timing of the GEMM library (performance.yaml engines.<engine>.linear_kernel): a fixed
time per GEMM that neither bytes nor tp divide, plus the larger of streaming the weights and computing."""

from __future__ import annotations

import pytest

from benchmarks.dense_gemm_fit import fit, gemm_rows, log_errors
from infragen.sizing.performance import (
    elementwise_s,
    engine_constants,
    gpu_figures,
    gpu_setup,
    linears_per_layer,
    stage_step_s,
)
from tests.sizing.conftest import DEEPSEEK_V2_LITE, LLAMA3_8B, MIXTRAL, gpu


def _kernel():
    k = engine_constants("vllm").linear_kernel
    assert k is not None
    return k


def test_the_data_holds_the_fit_of_the_h200_gemm_timing() -> None:
    """dense_gemm_h200.csv (80 layers, cuBLAS bf16 / fp8 at tp 1-8, M 1-256) and the GEMMs of dense_prefill_h200.csv
    (144 layers, M 128-16384) refit to the stored constants, and they reproduce every layer within 15 % (median
    under 5 %): one compute fraction per dtype serves decode batches and prefill chunks."""
    import math
    import statistics

    rows = gemm_rows()
    assert len(rows) == 224 and sum(r.tokens >= 512 for r in rows) == 108
    k = _kernel()
    refit = fit(rows, k)
    for name in ("fixed_us", "read_fraction", "compute_fraction", "fp8_compute_fraction"):
        assert getattr(refit, name) == pytest.approx(getattr(k, name), abs=1e-9), name
    errs = [abs(math.expm1(e)) for e in log_errors(k, rows)]
    assert statistics.median(errs) < 0.05 and max(errs) < 0.15


def test_both_vllm_profiles_use_the_measured_linears_and_tensorrt_llm_keeps_its_fit() -> None:
    assert engine_constants("vllm-0.5").linear_kernel == _kernel()
    assert engine_constants("tensorrt-llm").linear_kernel is None


def test_a_bf16_step_pays_a_fixed_time_per_gemm_on_top_of_the_roofline() -> None:
    s = gpu_setup(LLAMA3_8B, gpu_figures(gpu()), "bf16", 131072.0, "vllm", 1, 1, 1)
    e, k = engine_constants("vllm"), _kernel()
    assert s.linears_measured and s.linears_stage == 32 * 4  # qkv, o, gate-up, down
    seqs, ctx = 8.0, 1000.0
    gemm = 32 * 4 * k.fixed_us * 1e-6 + max(
        s.dense_flops_per_token * seqs / (s.peak_flops * k.compute_fraction),
        s.weight_bytes_dense_gpu / (s.bandwidth_bytes_per_s * k.read_fraction))
    attn = max(s.attn_flops_per_token_ctx * seqs * ctx / (s.peak_flops * e.prefill_compute_fraction),
               s.kv_bytes_per_token_gpu * seqs * ctx / (s.bandwidth_bytes_per_s * e.kv_bandwidth_fraction))
    host = e.step_overhead_ms * 1e-3 + e.per_seq_overhead_ms * 1e-3 * seqs + e.per_layer_overhead_us * 1e-6 * 32
    assert e.layer_ops is not None
    ew = elementwise_s(e.layer_ops, tuple(seqs * b for b in s.layer_ops_bytes_per_token), s.bandwidth_bytes_per_s)
    assert stage_step_s(s, seqs, ctx, 0.0, 0.0) == pytest.approx(gemm + attn + ew + host)


def test_tp_does_not_divide_the_per_gemm_time() -> None:
    """At one token the 8B layer measured 118.6 us at tp 1 and 30.8 us at tp 8 (3.85x): the model's linears at tp 8
    take the fixed times in full, so tp 8 is well short of 8x."""
    k = _kernel()
    times = {}
    for tp in (1, 8):
        s = gpu_setup(LLAMA3_8B, gpu_figures(gpu()), "bf16", 131072.0, "vllm", tp, 1, 1)
        times[tp] = max(s.weight_bytes_dense_gpu / (s.bandwidth_bytes_per_s * k.read_fraction),
                        s.dense_flops_per_token / (s.peak_flops * k.compute_fraction)) \
            + s.linears_stage * k.fixed_us * 1e-6
        assert s.linears_stage == 128
    assert 3.0 < times[1] / times[8] < 6.0


@pytest.mark.parametrize("precision", ["int4-awq", "int8"])
def test_kernels_that_were_not_timed_keep_the_fitted_roofline(precision: str) -> None:
    """Weight-only int4 (Marlin) and int8 W8A8 run other kernels than the cuBLAS GEMMs timed."""
    s = gpu_setup(LLAMA3_8B, gpu_figures(gpu()), precision, 131072.0, "vllm", 1, 1, 1)
    e = engine_constants("vllm")
    assert not s.linears_measured
    gemm = max(s.dense_flops_per_token * 4 / (s.peak_flops * e.prefill_compute_fraction),
               s.weight_bytes_dense_gpu / (s.bandwidth_bytes_per_s * e.decode_bandwidth_fraction))
    host = e.step_overhead_ms * 1e-3 + e.per_seq_overhead_ms * 1e-3 * 4 + e.per_layer_overhead_us * 1e-6 * 32
    attn = s.kv_bytes_per_token_gpu * 4 * 10 / (s.bandwidth_bytes_per_s * e.kv_bandwidth_fraction)
    # nor the measured attention / elementwise ops (the fitted fractions carry them: test_layer_ops.py)
    assert stage_step_s(s, 4.0, 10.0, 0.0, 0.0) == pytest.approx(gemm + host + max(
        attn, s.attn_flops_per_token_ctx * 40 / (s.peak_flops * e.prefill_compute_fraction)))


def test_gemms_per_layer_follow_the_architecture() -> None:
    assert linears_per_layer(LLAMA3_8B) == 4
    assert linears_per_layer(MIXTRAL) == 3  # qkv, o, router (experts: the fused-MoE kernel)
    # MLA (4 attention linears); 1 dense layer of 27 (gate-up, down), 26 MoE layers (router + 2 shared)
    assert linears_per_layer(DEEPSEEK_V2_LITE) == pytest.approx(4 + (2 + 26 * 3) / 27)
