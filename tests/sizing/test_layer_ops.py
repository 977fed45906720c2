"""A dense layer's prefill attention and elementwise ops priced by their H200 timing (performance.yaml
engines.vllm.layer_ops), and prompt tokens not charged the LM head."""

from __future__ import annotations

import math
import statistics

import pytest

from benchmarks.layer_ops_fit import ELEMENTWISE, ELEMENTWISE_MIN_TOKENS, MIN_TOKENS, fit, log_errors, op_rows
from infragen.sizing.performance import (
    elementwise_bytes_per_token,
    elementwise_s,
    engine_constants,
    gpu_figures,
    gpu_setup,
    prefill_attention_s,
    stage_step_s,
)
from tests.sizing.conftest import LLAMA3_8B, MIXTRAL, gpu


def _ops():
    k = engine_constants("vllm").layer_ops
    assert k is not None
    return k


def test_the_data_holds_the_fit_of_the_h200_layer_timing() -> None:
    """dense_prefill_h200.csv refits to the stored constants; attention within a median 10 % from 512 tokens, each
    elementwise op within a median 15 % from 4096 (its bandwidth-bound rate)."""
    rows = op_rows()
    k = _ops()
    refit = fit(rows, k)
    for name in ("attention_compute_fraction", "attention_row_ns", *ELEMENTWISE.values()):
        assert getattr(refit, name) == pytest.approx(getattr(k, name), abs=1e-9), name
    for kind, low, limit in (("attention", MIN_TOKENS, 0.10), *((op, ELEMENTWISE_MIN_TOKENS, 0.15)
                                                                  for op in ELEMENTWISE)):
        part = [r for r in rows if r.kind == kind and r.tokens >= low]
        assert len(part) >= 27
        assert statistics.median(abs(math.expm1(e)) for e in log_errors(k, part)) < limit, kind


def test_only_the_current_profile_prices_them() -> None:
    assert engine_constants("vllm-0.5").layer_ops is None and engine_constants("tensorrt-llm").layer_ops is None


def test_a_prefill_step_is_linears_attention_elementwise_and_host() -> None:
    s = gpu_setup(LLAMA3_8B, gpu_figures(gpu()), "bf16", 131072.0, "vllm", 1, 1, 1)
    e, k, lk = engine_constants("vllm"), _ops(), engine_constants("vllm").linear_kernel
    assert lk is not None
    prompt = 4096.0
    flops = (s.dense_flops_per_token - s.lm_head_flops_per_token) * prompt  # no logits for prompt tokens
    gemm = s.linears_stage * lk.fixed_us * 1e-6 + max(flops / (s.peak_flops * lk.compute_fraction),
                                                      s.weight_bytes_dense_gpu / (s.bandwidth_bytes_per_s
                                                                                  * lk.read_fraction))
    attn = prefill_attention_s(k, prompt * 32, s.attn_flops_per_token_ctx * prompt * prompt / 2, 989e12)
    attn = max(attn, s.kv_bytes_per_token_gpu * prompt / (s.bandwidth_bytes_per_s * e.kv_bandwidth_fraction))
    ew = elementwise_s(k, tuple(prompt * b for b in s.layer_ops_bytes_per_token), s.bandwidth_bytes_per_s)
    host = e.step_overhead_ms * 1e-3 + e.per_layer_overhead_us * 1e-6 * 32
    assert stage_step_s(s, 0.0, 0.0, prompt, prompt / 2) == pytest.approx(gemm + attn + ew + host)
    assert s.lm_head_flops_per_token == pytest.approx(2 * 128256 * 4096)


def test_elementwise_bytes_follow_the_layer_shapes() -> None:
    """Norms act on the full hidden state on every GPU; SiLU-mul and RoPE on the GPU's shard."""
    norm1, act1, rope1 = elementwise_bytes_per_token(LLAMA3_8B, 1)
    norm8, act8, rope8 = elementwise_bytes_per_token(LLAMA3_8B, 8)
    assert norm1 == norm8 == 2 * 2 * 4 * 4096
    assert act1 == 8 * act8 == 2 * 3 * 14336
    assert rope1 == 2 * 2 * (32 + 8) * 128 and rope8 == 2 * 2 * (4 + 1) * 128


def test_moe_models_keep_their_own_non_expert_terms() -> None:
    s = gpu_setup(MIXTRAL, gpu_figures(gpu()), "bf16", 131072.0, "vllm", 2, 1, 1)
    assert s.layer_ops_bytes_per_token == (0.0, 0.0, 0.0)


def test_kernels_priced_by_the_fitted_roofline_do_not_pay_them_twice() -> None:
    """Weight-only int4 (Marlin) keeps the Lambda-fitted fractions, which carry attention and the elementwise work:
    the same step with the layer ops switched off is unchanged."""
    import dataclasses

    s = gpu_setup(LLAMA3_8B, gpu_figures(gpu()), "int4-awq", 131072.0, "vllm", 1, 1, 1)
    assert not s.linears_measured and s.layer_ops_bytes_per_token[0] > 0
    off = dataclasses.replace(s, layer_ops_bytes_per_token=(0.0, 0.0, 0.0))
    assert stage_step_s(s, 8.0, 1000.0, 2048.0, 1024.0) == stage_step_s(off, 8.0, 1000.0, 2048.0, 1024.0)
