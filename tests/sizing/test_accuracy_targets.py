"""Regression guard on the accuracy benchmark: the issue's targets that the model meets must stay met.

Runs the vLLM and llama.cpp rows of benchmarks/data (about 1.5 s); the full table is `python benchmarks/accuracy.py`.
"""

from __future__ import annotations

import statistics

import pytest

from benchmarks import accuracy
from infragen.sizing.constants import load_constants


@pytest.fixture(scope="module")
def outcomes() -> list[accuracy.Outcome]:
    return accuracy.evaluate_all(("vLLM", "llama.cpp"))[0]


def _median_abs(outcomes: list[accuracy.Outcome], group: str, metric: str) -> float:
    errs = [abs(o.error) for o in outcomes if o.group.startswith(group) and o.metric == metric]
    assert errs, (group, metric)
    return statistics.median(errs)


def test_vllm_throughput_and_latency_within_20_percent(outcomes: list[accuracy.Outcome]) -> None:
    assert _median_abs(outcomes, "vLLM Lambda", "output_tokens_per_s") <= 0.20
    assert _median_abs(outcomes, "vLLM Lambda", "latency_ms_as_reported") <= 0.20


def test_weights_within_5_percent(outcomes: list[accuracy.Outcome]) -> None:
    assert _median_abs(outcomes, "vLLM weights", "weights_GiB_per_gpu") <= 0.05


def test_llama_cpp_generation_within_25_percent(outcomes: list[accuracy.Outcome]) -> None:
    assert _median_abs(outcomes, "llama.cpp (ryzen", "tg128_tokens_per_s") <= 0.25


def test_every_constant_says_where_it_comes_from() -> None:
    c = load_constants()
    assert c.source and c.as_of and c.vllm_memory.source and c.interconnect.source and c.cpu.fitted_on
    for name, engine in c.engines.items():
        assert "placeholder" not in engine.fitted_on and len(engine.fitted_on) > 40, name
    for regime, band in c.uncertainty.items():
        assert band.derived and 0 < band.relative < 1, regime
    assert {"vllm", "vllm-0.5", "tensorrt-llm"} <= set(c.engines)


def test_llama_cpp_on_the_probed_machine_decodes_within_20_percent_of_llama_bench() -> None:
    """llama-bench tg128 on this project's 2-vCPU EPYC (Zen 3, AVX2, 21.97 GB/s probed; benchmarks/data/llama_bench):
    cpu.measured_bandwidth_fraction is fitted on the F16 row only; the Q4_0 row (25.8 t/s) is an independent check
    within the issue's +-20 % (Q8_0, 11.9 t/s, is +29 %: reported by accuracy.py, not hidden)."""
    from benchmarks.llama_bench_check import bench_rows, fit_measured_fraction, fitted

    rows = bench_rows()
    current = load_constants().cpu.measured_bandwidth_fraction
    assert fit_measured_fraction(rows, current) == pytest.approx(current, rel=0.01)  # the file holds the fit
    fit_rows = [r for r in rows if fitted(r)]
    assert [r.precision for r in fit_rows] == ["fp16"]
    q4 = next(r for r in rows if r.precision == "q4_0" and r.test == "tg128")
    assert abs(q4.error) <= 0.20


def test_independent_tp_lines_keep_dense_and_moe_apart() -> None:
    """The tp split must not mix regimes: the independent tp 4 / tp 8 rows are almost all many-expert MoE, so a pooled
    'tp 4' figure reports the MoE error as if it were a tensor-parallel one (EX0024, dense 70B on 4 x H100, is +3 %)."""
    from benchmarks.accuracy_checks import regime_split_report

    rows = [accuracy.evaluate_row(r) for r in accuracy.read_rows() if accuracy.is_current_vllm_check(r)]
    lines = [ln.strip() for ln in regime_split_report([o for o in rows if not isinstance(o, str)])]
    tp_lines = [ln for ln in lines if ln.startswith("tp ")]
    assert tp_lines and all(ln.split()[2] in ("dense", "MoE") for ln in tp_lines), tp_lines
    dense_tp4 = [ln for ln in tp_lines if ln.startswith("tp 4 dense") and "output_tokens_per_s" in ln]
    assert len(dense_tp4) == 1 and "n= 1" in dense_tp4[0], tp_lines
