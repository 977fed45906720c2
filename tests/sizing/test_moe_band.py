"""Many-expert MoE models get their own, wider error band (their measured rows are over-predicted)."""

from __future__ import annotations

from infragen.catalog import load_catalog
from infragen.catalog.models import load_model_registry
from infragen.sizing.constants import load_constants
from infragen.sizing.estimate import estimate
from infragen.sizing.hardware import hardware_from_gpu
from tests.sizing.conftest import MIXTRAL


def test_qwen3_moe_estimates_carry_the_many_expert_band() -> None:
    model = load_model_registry()["qwen3-30b-a3b"]
    assert model.num_experts >= 32
    est = estimate(model, hardware_from_gpu(load_catalog().accelerator("H100"), 1), precision="bf16",
                   input_len=512, output_len=256, concurrency=16)
    assert est.regime == "gpu-moe-many-experts"
    bands = load_constants().uncertainty
    dense = max(bands[r].relative for r in ("gpu-decode-compute-bound", "gpu-decode-memory-bound"))
    assert est.relative_uncertainty == bands["gpu-moe-many-experts"].relative > dense + 0.05


def test_mixtral_keeps_the_dense_bands() -> None:
    est = estimate(MIXTRAL, hardware_from_gpu(load_catalog().accelerator("H100"), 2), precision="bf16", tp=2,
                   input_len=512, output_len=256, concurrency=16)
    assert est.regime.startswith("gpu-decode-")
