"""Routed experts with few tokens each: the fused-MoE kernel computes whole M tiles (vLLM 0.34's default
BLOCK_SIZE_M by batch size, performance.yaml moe.tile_tokens), so most of a tile is padding at small m."""

from __future__ import annotations

import pytest

from infragen.catalog import load_catalog
from infragen.catalog.models import load_model_registry
from infragen.sizing.constants import load_constants
from infragen.sizing.performance import expert_read_fraction, gpu_figures, gpu_setup, padded_expert_pairs
from tests.sizing.conftest import MIXTRAL


def _setup(model, tp: int = 1):  # type: ignore[no-untyped-def]
    return gpu_setup(model, gpu_figures(load_catalog().accelerator("H100")), "bf16", 98304.0, "vllm", tp, 1, 1)


def test_tiles_follow_vllms_default_config() -> None:
    tiles = [(t.max_batch_tokens, t.tile_tokens) for t in load_constants().moe.tile_tokens]
    assert tiles == [(32, 16), (96, 32), (512, 64), (None, 128)]  # fused_moe.py get_default_config (bf16/fp16)


def test_many_small_experts_compute_mostly_padding() -> None:
    s = _setup(load_model_registry()["qwen3-30b-a3b"])  # 128 experts, top 8
    tokens = 16.0  # 16 x 8 / 128 = 1 token per expert: each touched expert computes one 16-row tile
    touched = 128 * expert_read_fraction(128, 8, tokens)
    assert padded_expert_pairs(s, tokens) == pytest.approx(touched * 16)
    assert padded_expert_pairs(s, tokens) / (tokens * 8) > 8


def test_mixtral_at_a_full_batch_computes_its_rows() -> None:
    s = _setup(MIXTRAL, 2)  # 8 experts, top 2: 256 tokens give 64 per expert, exactly one 64-row tile each
    assert padded_expert_pairs(s, 256.0) == pytest.approx(256 * 2)


def test_the_many_expert_band_is_the_80th_percentile_of_its_residuals() -> None:
    """The band in performance.yaml is what the independent many-expert rows (EX0025-EX0037) give today."""
    from benchmarks import accuracy

    errs = sorted(abs(o.error) for o in (accuracy.evaluate_row(r) for r in accuracy.read_rows()
                                         if accuracy.is_current_vllm_check(r))
                  if not isinstance(o, str) and accuracy.moe_class(o) == "many-expert MoE")
    assert len(errs) == load_constants().uncertainty["gpu-moe-many-experts"].rows
    p80 = errs[min(len(errs) - 1, int(0.8 * len(errs)))]
    assert load_constants().uncertainty["gpu-moe-many-experts"].relative == pytest.approx(p80, abs=0.005)
