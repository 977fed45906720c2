"""benchmarks/calibrate_check.py: calibrate on one result, predict the other results of the same hardware."""

from __future__ import annotations

import pytest

from benchmarks import calibrate_check as cc


def _figure(result: str, hardware: str, measured: float, slow: float) -> cc.Figure:
    """A generation rate the model over-predicts by `slow`."""
    return cc.Figure(result, hardware, "s", "m", "decode", measured, lambda d, p: measured * slow * d)


def test_a_machine_uniformly_slower_than_modelled_is_learnt_from_one_result() -> None:
    figures = [_figure(r, "hw", m, 1.3) for r, m in (("a", 10.0), ("b", 20.0), ("c", 40.0))]
    trials = cc.trials(figures, "vllm")
    assert [t.result for t in trials] == ["a", "b", "c"]
    for t in trials:
        assert t.factors[0] == pytest.approx(1 / 1.3, rel=1e-6) and t.factors[1] == 1.0
        assert all(e == pytest.approx(0.3) for e in t.before)
        assert all(abs(e) < 1e-6 for e in t.after)
    lines = cc.report_lines("t", trials)
    assert "within 10% 6 of 6 (100%; uncalibrated 0)" in lines[1] and "target met" in lines[-1]


def test_results_calibrate_only_their_own_hardware() -> None:
    figures = [_figure("a", "hw1", 10.0, 1.3), _figure("b", "hw2", 10.0, 0.7)]
    assert cc.trials(figures, "vllm") == []  # one result per hardware: nothing to predict
    assert "no hardware with two results" in cc.report_lines("t", [])[1]


def test_the_independent_rows_give_trials_on_both_engines() -> None:
    vllm = cc.trials(cc.vllm_figures(), "vllm")
    assert {t.hardware for t in vllm} >= {"vllm on 1 x h100-sxm-80gb", "vllm on 1 x a100-80gb"}
    cpu = cc.trials(cc.llama_bench_figures(), "llama.cpp", bandwidth_measured=True)
    assert cpu and all(t.hardware.startswith("llama.cpp on ") for t in cpu)
    text = "\n".join(cc.report(verbose=False))
    assert text.count("; target ") == 3  # each of the three sections says met or not met


def test_a_result_calibrates_only_figures_of_its_models_shapes() -> None:
    # as estimate/plan apply a profile (Calibration.for_model): another model's figures stay uncalibrated
    same = [cc.Figure(r, "hw", "s", "m", "decode", 10.0, lambda d, p: 13.0 * d, shape="a") for r in ("x", "y")]
    other = cc.Figure("z", "hw", "s", "m", "decode", 10.0, lambda d, p: 7.0 * d, shape="b")
    on_x = next(t for t in cc.trials([*same, other], "vllm") if t.result == "x")
    assert on_x.applied == (True, False)
    assert on_x.after[0] == pytest.approx(0.0, abs=1e-6) and on_x.after[1] == pytest.approx(-0.3)
    lines = cc.report_lines("t", cc.trials([*same, other], "vllm"))
    assert any("of the calibrating result's model (the ones a profile changes): 2," in line for line in lines)
