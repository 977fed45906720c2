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
