"""Per-type llama.cpp kernel rates (performance.yaml cpu.weight_kernels): where they apply and what they do."""

from __future__ import annotations

from dataclasses import replace
from itertools import pairwise
from pathlib import Path

import pytest

from infragen.catalog import load_catalog
from infragen.catalog.hf_config import load_hf_config
from infragen.sizing.constants import load_constants
from infragen.sizing.cpu_performance import generation_step_s, weight_kernel
from infragen.sizing.estimate import estimate, llama_cpp_cpu_setup
from infragen.sizing.hardware import load_hardware_file

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "llama_bench"


@pytest.fixture(scope="module")
def avx2_host():
    return load_hardware_file(BENCH / "machine.yaml", load_catalog())


@pytest.fixture(scope="module")
def avx512_host():
    return load_hardware_file(BENCH / "machine-2026-12-04.yaml", load_catalog())


def test_q8_0_kernel_applies_on_avx2_without_avx512_only(avx2_host) -> None:
    s = llama_cpp_cpu_setup(avx2_host)
    assert weight_kernel(s, "q8_0") is not None
    assert weight_kernel(s, "q4_0") is None and weight_kernel(s, "fp16") is None
    assert weight_kernel(s, None) is None  # other builds' rows
    assert weight_kernel(replace(s, simd=("avx2", "avx512")), "q8_0") != weight_kernel(s, "q8_0")
    assert weight_kernel(replace(s, arch="aarch64", simd=("neon",)), "q8_0") is None


def test_avx512_kernels_apply_to_each_type_on_avx512_without_amx(avx512_host) -> None:
    s = llama_cpp_cpu_setup(avx512_host)
    assert "avx512" in s.simd
    kernels = {t: weight_kernel(s, t) for t in ("fp16", "q8_0", "q4_0")}
    assert all(k is not None for k in kernels.values())
    assert weight_kernel(s, None) is None and weight_kernel(s, "q4_k_m") is None
    # an AMX CPU runs these kernels too (infragen's nodes compile AMX out) but at its own measured rates: the AMX
    # set, Q8_0 and Q4_0 only (F16 decode is read at the bandwidth there)
    amx = {t: weight_kernel(replace(s, simd=(*s.simd, "amx")), t) for t in kernels}
    assert amx["fp16"] is None and all(amx[t] not in (None, kernels[t]) for t in ("q8_0", "q4_0"))
    # int8 GEMMs (VNNI) beat F16's, which runs at the FP32 FMA rate (its factor above 1 holds the cores' clock over
    # the hypervisor's 2.596 GHz, as Zen 5's does: 1.3061 refitted on a quiet run, 1.3215 on Zen 5)
    assert kernels["q4_0"].prompt_flops_factor > kernels["q8_0"].prompt_flops_factor > \
        kernels["fp16"].prompt_flops_factor > 1.0


def test_the_matrix_vector_floor_is_one_slot_and_batches_run_the_gemm(avx512_host) -> None:
    """One slot runs the type's GEMV (the fitted floor); two or more slots share a GEMM at the prompt rate, so a
    step never gets cheaper with more slots and costs less than slots x one slot's."""
    s = llama_cpp_cpu_setup(avx512_host)
    active = 1.034e9
    for kind in ("fp16", "q8_0", "q4_0"):
        k = weight_kernel(s, kind)
        one = generation_step_s(s, 0.0, active, 0.0, 1, kind)
        assert one == pytest.approx(active / (s.threads * s.clock_hz * k.generation_weights_per_cycle_per_core))
        assert generation_step_s(s, 0.0, active, 0.0, 0.3, kind) == one  # a decoding step carries a whole request
        steps = [generation_step_s(s, 0.0, active, 0.0, b, kind) for b in range(1, 65)]
        assert all(b >= a for a, b in pairwise(steps))
        c = load_constants().cpu
        gemm = 2 * active * 64 / (s.flops_per_s * c.prompt_flops_fraction * k.prompt_flops_factor)
        assert steps[-1] == pytest.approx(max(one, gemm))
        assert steps[-1] < 64 * one


def test_q8_0_on_avx2_is_slower_than_its_bytes_alone_would_make_it(avx2_host) -> None:
    """Generation: a compute floor above the bandwidth time; prompts: below the F16 rate."""
    model = load_hf_config(BENCH / "tinyllama-1.1b-config.json")
    plain = replace(avx2_host, cpu=avx2_host.cpu.model_copy(update={"simd": ["avx2", "avx512", "amx"]}))

    def run(hw, kind: str, inp: int, out: int):
        return estimate(model, hw, precision=kind, engine="llama.cpp", input_len=inp, output_len=out, concurrency=1)

    tg, tg_free = run(avx2_host, "q8_0", 1, 128), run(plain, "q8_0", 1, 128)
    assert tg.tpot_ms > 1.2 * tg_free.tpot_ms
    pp, pp_f16 = run(avx2_host, "q8_0", 512, 1), run(avx2_host, "fp16", 512, 1)
    assert pp.ttft_ms == pytest.approx(pp_f16.ttft_ms / 0.6735, rel=0.01)


def test_closed_loop_compute_per_slot_is_the_batch_gemm_not_the_one_slot_gemv(avx512_host) -> None:
    """With many slots, requests/s is bounded by the batched kernels' rate, not by slots x the one-slot GEMV."""
    model = load_hf_config(BENCH / "tinyllama-1.1b-config.json")
    one = estimate(model, avx512_host, precision="q4_0", engine="llama.cpp", input_len=1, output_len=64,
                   concurrency=1)
    many = estimate(model, avx512_host, precision="q4_0", engine="llama.cpp", input_len=1, output_len=64,
                    concurrency=8)
    assert many.output_tokens_per_s > 2.0 * one.output_tokens_per_s
