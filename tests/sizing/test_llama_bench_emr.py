"""The Intel llama-bench runs of 2026-12-06 (benchmarks/data/llama_bench/, tags 2026-12-06x and 2026-12-06xb): a
2-vCPU Xeon VM of family 6 model 207 (Emerald Rapids, AVX-512 and AMX), llama.cpp built without AMX as infragen's
nodes build it (engines.yaml build_cflags). Run x's TinyLlama Q8_0 / Q4_0 rows are what the AMX set of
cpu.weight_kernels is fitted on; its other rows and every row of run xb (the same VM, probed again) stay independent
checks (xb was the run the issue's target line read until a later run on another CPU)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from benchmarks.llama_bench_check import CONFIGS, TARGET, bench_rows, fed, target_lines
from infragen.catalog import load_catalog
from infragen.catalog.hf_config import load_hf_config
from infragen.sizing.cpu_performance import weight_kernel
from infragen.sizing.estimate import llama_cpp_cpu_setup
from infragen.sizing.hardware import load_hardware_file
from tests.sizing.conftest import llama_bench_rate

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "llama_bench"
RUNS = ("2026-12-06x", "2026-12-06xb")
AMX_SET = "cpu.weight_kernels (x86_64 AVX-512 with AMX compiled out)"


@pytest.fixture(scope="module")
def rows():
    return [r for r in bench_rows() if r.run in RUNS]


@pytest.mark.parametrize("run", RUNS)
def test_each_run_has_its_own_probe_of_an_amx_xeon_and_six_files(run: str) -> None:
    doc = yaml.safe_load((BENCH / f"machine-{run}.yaml").read_text())
    cpu = doc["cpu"]
    assert cpu["microarchitecture"] == "family 6 model 207" and {"avx512", "amx"} <= set(cpu["simd"])
    assert cpu["fp32_flops_per_cycle_per_core"] == 64 and doc["measured"]["processes"] == 2
    files = sorted(BENCH.glob(f"llama-bench-*-{run}.json"))
    assert len(files) == 6
    for path in files:
        record = json.loads(path.read_text())
        assert record["hardware_file"] == f"machine-{run}.yaml" and " -t 2 " in record["command"]
        assert record["nice"] == -10 and len(record["load_average_before_after"]) == 2


def test_only_run_xs_tinyllama_q8_and_q4_rows_are_fitted(rows) -> None:
    assert sorted((r.run, r.shape, r.precision, r.test) for r in rows) == sorted(
        (run, s, p, t) for run in RUNS for s in ("tinyllama", "llama3.2-3b") for p in ("fp16", "q8_0", "q4_0")
        for t in ("pp512", "tg128"))
    fitted = sorted((r.precision, r.test) for r in rows if fed(r))
    assert fitted == [("q4_0", "pp512"), ("q4_0", "tg128"), ("q8_0", "pp512"), ("q8_0", "tg128")]
    assert {r.run for r in rows if fed(r)} == {"2026-12-06x"} and {fed(r) for r in rows} == {None, AMX_SET}
    assert {r.shape for r in rows if fed(r)} == {"tinyllama"}


def test_the_rows_are_predicted_with_the_amx_set_and_f16_with_the_bandwidth(rows) -> None:
    for run in RUNS:
        hw = load_hardware_file(BENCH / f"machine-{run}.yaml", load_catalog())
        setup = llama_cpp_cpu_setup(hw)
        for r in (r for r in rows if r.run == run):
            model = load_hf_config(BENCH / CONFIGS[r.shape])
            assert r.predicted_tokens_per_s == pytest.approx(llama_bench_rate(model, hw, r.precision, r.test),
                                                             rel=1e-12)
        assert weight_kernel(setup, "fp16") is None  # F16 decode streams its weights: no floor fitted
        q4 = weight_kernel(setup, "q4_0")
        assert q4 is not None and q4.generation_weights_per_cycle_per_core == pytest.approx(5.391)
        # the same CPU without AMX takes the Zen 4-fitted AVX-512 set, which would have it 1.8x faster
        no_amx = replace(setup, simd=tuple(f for f in setup.simd if f != "amx"))
        other = weight_kernel(no_amx, "q4_0")
        assert other is not None and other.generation_weights_per_cycle_per_core > 9
    before = [r for r in rows if r.test == "tg128" and r.precision in ("q8_0", "q4_0")]
    assert all(r.bound == "floor" for r in before)  # the kernels, not the bandwidth, set quantized decode here


def test_the_target_line_reads_the_newest_unfitted_run(rows) -> None:
    everything = bench_rows()
    newest = max(everything, key=lambda r: r.date)
    lines = target_lines(everything)
    assert f"({newest.machine})" in lines[0] and f"newest run '{newest.run}'" in lines[0]
    tg = [r for r in everything if r.run == newest.run and r.test.startswith("tg")]
    inside = sum(abs(r.error) <= TARGET for r in tg)
    assert lines[-1].strip().startswith(f"decode (tg) within +-20%: {inside} of {len(tg)}: target ")


def test_the_emerald_rapids_rerun_decodes_within_the_target(rows) -> None:
    # run 2026-12-06xb: the same Intel VM re-probed 20 minutes after the run the AMX set was fitted on
    tg = [r for r in rows if r.run == "2026-12-06xb" and r.test.startswith("tg")]
    inside = sum(abs(r.error) <= TARGET for r in tg)
    assert inside == len(tg) == 6, [(r.shape, r.precision, round(r.error, 3)) for r in tg]
