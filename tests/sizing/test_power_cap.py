"""A power-capped card with the datasheet peaks of its full-power sibling sustains proportionally less compute."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from infragen.catalog import load_catalog
from infragen.catalog.records import Accelerator
from infragen.sizing.performance import gpu_figures, gpu_setup
from tests.sizing.conftest import LLAMA3_8B


def test_a100_pcie_sustains_300_over_400_of_the_sxm_peak() -> None:
    catalog = load_catalog()
    pcie, sxm = catalog.accelerator("a100-pcie-80gb"), catalog.accelerator("a100-80gb")
    assert pcie.fp16_tflops == sxm.fp16_tflops == 312.0  # same datasheet peak (gmasse/gpu-specs)
    assert pcie.compute_power_scale == pytest.approx(0.75)
    assert sxm.compute_power_scale == 1.0
    slow = gpu_setup(LLAMA3_8B, gpu_figures(pcie), "bf16", 131072.0, "vllm", 1, 1, 1)
    fast = gpu_setup(LLAMA3_8B, gpu_figures(sxm), "bf16", 131072.0, "vllm", 1, 1, 1)
    assert slow.peak_flops == pytest.approx(0.75 * fast.peak_flops)
    assert slow.bandwidth_bytes_per_s == pytest.approx(1935e9)


def test_a100_pcie_alias_resolves() -> None:
    assert load_catalog().accelerator("A100-PCIE-80GB").id == "a100-pcie-80gb"


def test_a_full_power_figure_below_the_cards_own_tdp_is_rejected() -> None:
    sxm = load_catalog().accelerator("a100-80gb")
    with pytest.raises(ValidationError, match="full_power_tdp_w"):
        Accelerator.model_validate({**sxm.model_dump(), "id": "bad", "full_power_tdp_w": 300.0})


def test_gh200_has_hopper_peaks_and_4_tb_s() -> None:
    gh = load_catalog().accelerator("GH200")
    assert (gh.memory_bandwidth_gb_per_s, gh.fp8_tflops, gh.memory_gib) == (4000.0, 1979.0, 96.0)
