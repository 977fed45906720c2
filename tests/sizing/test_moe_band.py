"""Many-expert MoE models get their own error band, from their own measured rows; every planned regime's band is
what its rows give (so the bands cannot drift from the data)."""

from __future__ import annotations

import pytest

from benchmarks import accuracy
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
    assert est.relative_uncertainty == load_constants().uncertainty["gpu-moe-many-experts"].relative


@pytest.fixture(scope="module")
def derived() -> dict[str, tuple[float, int]]:
    return accuracy.bands(accuracy.evaluate_all()[0])


@pytest.mark.parametrize("regime", ["gpu-decode-compute-bound", "gpu-decode-memory-bound", "gpu-moe-many-experts",
                                    "cpu-generation", "cpu-prompt"])
def test_bands_are_recomputed_from_the_calibration_rows(derived, regime: str) -> None:
    stored = load_constants().uncertainty[regime]
    band, rows = derived[regime]
    assert (stored.relative, stored.rows) == pytest.approx((band, rows), abs=0.0015), (
        f"{regime}: performance.yaml uncertainty has {stored.relative} over {stored.rows} rows, the rows give "
        f"{band:.4f} over {rows}: copy the figures `python benchmarks/accuracy.py` prints under 'error bands'")


def test_mixtral_keeps_the_dense_bands() -> None:
    est = estimate(MIXTRAL, hardware_from_gpu(load_catalog().accelerator("H100"), 2), precision="bf16", tp=2,
                   input_len=512, output_len=256, concurrency=16)
    assert est.regime.startswith("gpu-decode-")
