"""Exact memory arithmetic: parameter counts, weight bytes by precision, KV bytes per token, vLLM's budget."""

from __future__ import annotations

import pytest

from infragen.errors import InputError
from infragen.sizing.estimate import estimate_memory
from infragen.sizing.hardware import hardware_from_gpu
from infragen.sizing.memory import (
    GGML_BYTES_PER_WEIGHT,
    gguf_weight_bytes,
    kv_bytes_per_token,
    largest_model_len,
    max_sequences,
    param_groups,
    weight_bytes_per_gpu,
)
from infragen.units import GIB
from tests.sizing.conftest import DEEPSEEK_V2_LITE, GEMMA2_LIKE, LLAMA3_8B, LLAMA3_70B, MIXTRAL, gpu


def test_llama3_8b_kv_is_131072_bytes_per_token_in_bf16() -> None:
    # 2 (K and V) x 8 KV heads x 128 head_dim x 2 bytes x 32 layers
    assert kv_bytes_per_token(LLAMA3_8B, 2.0) == 131_072


def test_fp8_kv_halves_the_cache() -> None:
    assert kv_bytes_per_token(LLAMA3_8B, 1.0) == 65_536


def test_mla_caches_the_latent_and_rope_key_only() -> None:
    # DeepSeek-V2-Lite: (kv_lora_rank 512 + qk_rope_head_dim 64) x 2 bytes x 27 layers
    assert kv_bytes_per_token(DEEPSEEK_V2_LITE, 2.0) == (512 + 64) * 2 * 27


def test_parameter_counts_match_published_sizes() -> None:
    assert param_groups(LLAMA3_8B).total() == 8_030_261_248
    assert param_groups(LLAMA3_70B).total() / 1e9 == pytest.approx(70.55, abs=0.01)
    mixtral = param_groups(MIXTRAL)
    assert mixtral.total() / 1e9 == pytest.approx(46.7, abs=0.1)  # Mistral: 46.7B total
    # Mistral's 12.9B active counts the embedding table; active() counts only matmul weights (FLOPs).
    assert (mixtral.active() + mixtral.embed) / 1e9 == pytest.approx(12.9, abs=0.05)


def test_llama3_70b_bf16_weights_are_131_4_gib() -> None:
    assert weight_bytes_per_gpu(LLAMA3_70B, "bf16", 1, 1) / GIB == pytest.approx(131.4, abs=0.05)


def test_tensor_parallel_splits_weights_and_pipeline_splits_layers() -> None:
    one = weight_bytes_per_gpu(LLAMA3_70B, "bf16", 1, 1)
    g = param_groups(LLAMA3_70B)
    norms = 80 * g.norms_per_layer * 2.0  # RMSNorm weights are replicated on every TP rank
    assert weight_bytes_per_gpu(LLAMA3_70B, "bf16", 4, 1) == pytest.approx((one - norms) / 4 + norms)
    # pp=2: 40 layers each; the most loaded stage holds one of embedding/lm_head (same size here)
    assert weight_bytes_per_gpu(LLAMA3_70B, "bf16", 1, 2) == pytest.approx((one - 2 * g.embed * 2) / 2 + g.embed * 2)


def test_kv_heads_are_replicated_when_tp_exceeds_them() -> None:
    # 8 KV heads at tp=16: every GPU keeps one KV head, so k/v projections do not shrink past tp=8.
    g = param_groups(LLAMA3_70B)
    at8 = weight_bytes_per_gpu(LLAMA3_70B, "bf16", 8, 1)
    at16 = weight_bytes_per_gpu(LLAMA3_70B, "bf16", 16, 1)
    kv_part_8 = g.kv_proj_per_layer * 2 / 8 * 80
    norms = 80 * g.norms_per_layer * 2.0
    assert at16 == pytest.approx((at8 - kv_part_8 - norms) / 2 + kv_part_8 + norms)


def test_int8_keeps_embeddings_in_16_bits() -> None:
    g = param_groups(LLAMA3_70B)
    expected = g.linear_total() * 1.0 + (g.embed + g.lm_head + 80 * g.norms_per_layer) * 2.0
    assert weight_bytes_per_gpu(LLAMA3_70B, "int8", 1, 1) == pytest.approx(expected)


def test_awq_counts_group_scales_and_zeros() -> None:
    g = param_groups(LLAMA3_8B)
    per_weight = 0.5 + 2.5 / 128  # 4-bit weight + fp16 scale and 4-bit zero per 128
    expected = g.linear_total() * per_weight + (g.embed + g.lm_head + 32 * g.norms_per_layer) * 2.0
    assert weight_bytes_per_gpu(LLAMA3_8B, "int4-awq", 1, 1) == pytest.approx(expected)


def test_gguf_block_layouts() -> None:
    assert GGML_BYTES_PER_WEIGHT["q4_0"] * 32 == 18
    assert GGML_BYTES_PER_WEIGHT["q8_0"] * 32 == 34
    assert GGML_BYTES_PER_WEIGHT["q4_k"] * 256 == 144
    assert GGML_BYTES_PER_WEIGHT["q6_k"] * 256 == 210


def test_gguf_q4_k_m_of_llama3_8b_is_about_4_9_gb() -> None:
    # llama.cpp's Q4_K_M of Llama-3-8B is published at ~4.92 GB (files on the HF hub); within 2 %.
    assert gguf_weight_bytes(LLAMA3_8B, "q4_k_m") / 1e9 == pytest.approx(4.92, rel=0.02)
    assert gguf_weight_bytes(LLAMA3_8B, "q8_0") > gguf_weight_bytes(LLAMA3_8B, "q5_k_m") > gguf_weight_bytes(
        LLAMA3_8B, "q4_k_m") > gguf_weight_bytes(LLAMA3_8B, "q4_0") * 0.99


def test_sliding_window_layers_cap_long_sequences() -> None:
    full = max_sequences(LLAMA3_8B, 1_000_000, 8192, 16)
    assert full == 1_000_000 // 8192
    # half the layers keep only 4096 tokens: an 8192-token sequence costs 3/4 of a full one
    assert max_sequences(GEMMA2_LIKE, 600_000, 8192, 16) == int(600_000 // (8192 * 0.75))


def test_largest_model_len_is_capped_by_context_and_cache() -> None:
    assert largest_model_len(LLAMA3_8B, 5000) == 5000
    assert largest_model_len(LLAMA3_8B, 10**7) == 8192


def test_vllm_budget_is_utilisation_of_total_minus_weights_and_overheads() -> None:
    mem = estimate_memory(LLAMA3_8B, hardware_from_gpu(gpu(), 1), precision="bf16")
    assert mem.fits
    budget = 0.9 * 80
    kv_gib = mem.kv_cache_capacity_tokens * 131_072 / GIB
    assert mem.weights_gib_per_gpu + mem.overhead_gib_per_gpu + kv_gib == pytest.approx(budget, abs=0.01)
    assert mem.kv_cache_capacity_tokens % 16 == 0  # whole 16-token blocks


def test_weights_too_big_is_an_answer_with_numbers() -> None:
    mem = estimate_memory(LLAMA3_70B, hardware_from_gpu(gpu(memory_gib=24.0), 2), precision="bf16", tp=2)
    assert not mem.fits
    assert mem.reason is not None and "weights need 131.4 GiB" in mem.reason and "2 x" in mem.reason


def test_fp8_weights_need_compute_capability_8_0_or_newer() -> None:
    mem = estimate_memory(LLAMA3_8B, hardware_from_gpu(gpu(arch="Turing", fp8=None), 1), precision="fp8")
    assert not mem.fits and "has no vLLM kernel for fp8 weights: needs 8.0 or newer" in (mem.reason or "")


def test_impossible_layouts_are_input_errors() -> None:
    with pytest.raises(InputError):
        estimate_memory(LLAMA3_8B, hardware_from_gpu(gpu(), 2), precision="bf16", tp=4)
    with pytest.raises(InputError):
        estimate_memory(LLAMA3_8B, hardware_from_gpu(gpu(), 1), precision="q4_k_m")


def test_requested_max_model_len_beyond_cache_does_not_fit() -> None:
    small = hardware_from_gpu(gpu(memory_gib=24.0), 1)
    mem = estimate_memory(LLAMA3_8B, small, precision="bf16")
    assert mem.fits
    too_long = estimate_memory(LLAMA3_8B, small, precision="bf16", max_model_len=mem.max_model_len + 16)
    assert not too_long.fits


def test_vllm_sizes_the_cache_from_the_drivers_total_not_the_label() -> None:
    # nvidia-smi shows 81559 MiB on an H100 80GB HBM3 (modal-labs/modal-client PR #2797); vLLM's profiler sees that.
    from infragen.catalog import load_catalog

    catalog = load_catalog()
    h100 = catalog.accelerator("h100-sxm-80gb")
    assert h100.driver_memory_mib == 81559
    by_gpu = hardware_from_gpu(h100, 1)
    assert by_gpu.memory_per_gpu_gib == pytest.approx(81559 / 1024)
    from infragen.sizing.hardware import hardware_from_instance

    p5 = hardware_from_instance(catalog.instance("p5.4xlarge"), catalog)
    assert p5.memory_per_gpu_gib == pytest.approx(81559 / 1024)  # not the API's 81920 MiB
    labelled = estimate_memory(LLAMA3_8B, hardware_from_gpu(gpu(memory_gib=80.0), 1), precision="bf16")
    driver = estimate_memory(LLAMA3_8B, by_gpu, precision="bf16")
    assert driver.kv_cache_capacity_tokens < labelled.kv_cache_capacity_tokens


def test_a_gpu_without_a_driver_figure_uses_its_label() -> None:
    assert gpu(memory_gib=48.0).usable_memory_gib == 48.0
