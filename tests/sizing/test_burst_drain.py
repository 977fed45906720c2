"""Burst rows (every prompt sent at once, `vllm bench serve` without --request-rate) are predicted as the drains they
measured, not as a steady state at the full batch; a calibration rescales a drain's steps."""

from __future__ import annotations

import statistics

import pytest

from benchmarks import accuracy
from benchmarks.calibration_rows import Burst, burst_lengths, burst_of, read_rows
from infragen.catalog import load_catalog
from infragen.catalog.models import load_model_registry
from infragen.sizing.hardware import hardware_from_gpu
from infragen.sizing.memory import vllm_memory
from infragen.sizing.performance import gpu_figures, gpu_setup, simulate_drain

ROWS = {r["id"]: r for r in read_rows() if r["id"].startswith("EX")}


def _row(**over: str) -> dict[str, str]:
    base = {"concurrency": "max-load (request rate inf, 500 prompts)",
            "notes": "--dataset-name random --num-prompts 500"}
    return {**base, **over}


def test_burst_rows_say_how_many_requests_and_which_dataset() -> None:
    assert burst_of(ROWS["EX0025"]) == Burst(984, "sharegpt", None)  # 984 of 1000 prompts completed
    assert burst_of(ROWS["EX0026"]) == Burst(500, "random", None)
    assert burst_of(ROWS["EX0031"]) == Burst(500, "random", 16384)  # the server's --max-num-batched-tokens
    assert burst_of(ROWS["EX0023"]) == Burst(5000, "sharegpt", None)  # sglang README table 'inf | 5000 | ...'
    assert burst_of(ROWS["EX0012"]) is None  # a closed loop of 8 clients
    assert burst_of(_row(notes="no dataset named")) is None
    assert burst_of(_row(concurrency="64")) is None


def test_random_bursts_have_fixed_lengths_and_sharegpt_bursts_a_long_tail() -> None:
    ins, outs = burst_lengths(Burst(500, "random", None), 3996, 184)
    assert set(ins) == {3996} and set(outs) == {184} and len(outs) == 500
    ins, outs = burst_lengths(Burst(1000, "sharegpt", None), 216, 197)
    assert set(ins) == {216} and len(outs) == 1000
    assert statistics.mean(outs) == pytest.approx(197, rel=0.03)  # the run's mean
    assert min(outs) >= 4 and max(outs) <= 2048 - 216  # vLLM's ShareGPT sampling limits
    assert max(outs) > 5 * 197 and statistics.median(outs) < 197  # exponential: long tail, median below mean
    assert outs != sorted(outs)  # sent in a fixed shuffled order, not shortest first
    assert burst_lengths(Burst(1000, "sharegpt", None), 216, 197) == (ins, outs)  # deterministic


def test_a_drain_rescales_with_the_calibration_factors() -> None:
    model = load_model_registry()["llama-3.1-8b"]
    acc = load_catalog().accelerator("H100")
    mem = vllm_memory(model, hardware_from_gpu(acc, 1).memory_per_gpu_gib, "bf16", "bf16", 1, 1, 0.9)
    setup = gpu_setup(model, gpu_figures(acc), "bf16", mem.kv_bytes_per_token_gpu, "vllm", 1, 1, 1)
    res = simulate_drain(setup, [4000] * 64, [50] * 64, 256, mem.capacity_tokens, 8192)
    assert 0 < res.prompt_s < res.duration_s  # 64 prompts of 4,000 tokens (most of the time), 50 tokens out
    assert res.output_tokens_per_s_at(1.0, 1.0) == pytest.approx(res.output_tokens_per_s)
    twice = res.output_tokens_per_s_at(2.0, 2.0)
    assert twice == pytest.approx(2 * res.output_tokens_per_s)
    faster_prompts = res.output_tokens_per_s_at(1.0, 2.0)
    assert res.output_tokens_per_s < faster_prompts < twice
    expected = res.output_tokens / (res.duration_s - res.prompt_s / 2)
    assert faster_prompts == pytest.approx(expected)


@pytest.fixture(scope="module")
def outcomes() -> dict[str, accuracy.Outcome]:
    return {o.row_id: o for o in accuracy.evaluate_all()[0] if o.row_id.startswith("EX")}


def test_burst_rows_are_predicted_as_drains(outcomes: dict[str, accuracy.Outcome]) -> None:
    drained = {rid for rid, o in outcomes.items() if "drained" in o.note}
    assert {"EX0023", "EX0025", "EX0026", "EX0031", "EX0037"} <= drained
    assert not {"EX0012", "EX0036"} & drained  # a closed loop; a run at concurrency 4
    ex25 = outcomes["EX0025"]
    assert "burst of 984 sharegpt requests" in ex25.note and "steady state at batch" in ex25.note
    steady = float(ex25.note.split("steady state at batch ")[1].split()[1])
    # a one-shot drain of long-tailed requests runs most of its steps below the full batch
    assert ex25.predicted < 0.9 * steady
