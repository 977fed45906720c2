"""One engine step: the GEMMs and attention are separate kernels, each on its own roofline, and their times add."""

from __future__ import annotations

import pytest

from infragen.sizing.performance import engine_constants, gpu_figures, gpu_setup, stage_step_s
from tests.sizing.conftest import LLAMA3_8B, gpu


def test_compute_bound_gemms_and_memory_bound_attention_add_up() -> None:
    # tensorrt-llm: the fitted two-fraction roofline (the vLLM profiles' measured linears: test_linear_kernel.py)
    s = gpu_setup(LLAMA3_8B, gpu_figures(gpu()), "bf16", 131072.0, "tensorrt-llm", 1, 1, 1)
    e = engine_constants("tensorrt-llm")
    seqs, ctx, prompt = 64.0, 4096.0, 512.0
    flops_per_s = s.peak_flops * e.prefill_compute_fraction
    gemm = max(s.dense_flops_per_token * (seqs + prompt) / flops_per_s,
               s.weight_bytes_dense_gpu / (s.bandwidth_bytes_per_s * e.decode_bandwidth_fraction))
    attn = max(s.attn_flops_per_token_ctx * (seqs * ctx + prompt * prompt / 2) / flops_per_s,
               s.kv_bytes_per_token_gpu * (seqs * ctx + prompt) / (s.bandwidth_bytes_per_s * e.kv_bandwidth_fraction))
    host = e.step_overhead_ms * 1e-3 + e.per_seq_overhead_ms * 1e-3 * seqs + e.per_layer_overhead_us * 1e-6 * 32
    assert stage_step_s(s, seqs, ctx, prompt, prompt / 2) == pytest.approx(gemm + attn + host)
    # the sum is slower than one roofline over all FLOPs and bytes would be
    assert gemm + attn > max(gemm, attn) * 1.05
