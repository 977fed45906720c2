"""Per-type llama.cpp kernel rates (performance.yaml cpu.avx2_weight_kernels): where they apply and what they do."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from infragen.catalog import load_catalog
from infragen.catalog.hf_config import load_hf_config
from infragen.sizing.cpu_performance import weight_kernel
from infragen.sizing.estimate import estimate, llama_cpp_cpu_setup
from infragen.sizing.hardware import load_hardware_file

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "llama_bench"


@pytest.fixture(scope="module")
def avx2_host():
    return load_hardware_file(BENCH / "machine.yaml", load_catalog())


def test_q8_0_kernel_applies_on_avx2_without_avx512_only(avx2_host) -> None:
    s = llama_cpp_cpu_setup(avx2_host)
    assert weight_kernel(s, "q8_0") is not None
    assert weight_kernel(s, "q4_0") is None and weight_kernel(s, "fp16") is None
    assert weight_kernel(s, None) is None  # other builds' rows
    assert weight_kernel(replace(s, simd=("avx2", "avx512")), "q8_0") is None
    assert weight_kernel(replace(s, arch="aarch64", simd=("neon",)), "q8_0") is None


def test_q8_0_on_avx2_is_slower_than_its_bytes_alone_would_make_it(avx2_host) -> None:
    """Generation: a compute floor above the bandwidth time; prompts: below the F16 rate."""
    model = load_hf_config(BENCH / "tinyllama-1.1b-config.json")
    avx512 = replace(avx2_host, cpu=avx2_host.cpu.model_copy(update={"simd": ["avx2", "avx512"]}))

    def run(hw, kind: str, inp: int, out: int):
        return estimate(model, hw, precision=kind, engine="llama.cpp", input_len=inp, output_len=out, concurrency=1)

    tg, tg_free = run(avx2_host, "q8_0", 1, 128), run(avx512, "q8_0", 1, 128)
    assert tg.tpot_ms > 1.2 * tg_free.tpot_ms
    pp, pp_f16 = run(avx2_host, "q8_0", 512, 1), run(avx2_host, "fp16", 512, 1)
    assert pp.ttft_ms == pytest.approx(pp_f16.ttft_ms / 0.6735, rel=0.01)
