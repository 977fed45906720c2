"""The `vllm-0.6` profile: a dense layer's decode floor (fitted on Lambda's low-load vLLM 0.6.0 runs) and the host
time 0.6.0 overlaps with the GPU (fitted on one saturation series); accuracy.py predicts 0.6.x rows with it."""

from __future__ import annotations

import json
import statistics
from dataclasses import replace

import pytest

from benchmarks import accuracy, vllm06_fit
from benchmarks.accuracy_checks import tp_series_report
from benchmarks.calibration_rows import DATA, FITTED_GROUP, FITTED_ROWS, arch, is_current_vllm_check, read_rows
from infragen.catalog import load_catalog
from infragen.sizing import constants as constants_mod
from infragen.sizing.constants import LayerOps, load_constants
from infragen.sizing.memory import kv_bytes_per_token_per_layer
from infragen.sizing.performance import gpu_figures, gpu_setup, stage_step_s, token_step_s

_OPS = dict(attention_compute_fraction=0.3, attention_row_ns=1.0, norm_read_fraction=0.5,
            activation_read_fraction=0.5, rope_read_fraction=0.5, measured="m", fitted_on="f")


def _setup(model: str, gpu: str, engine: str, tp: int = 1):
    m = arch(model)
    kv = kv_bytes_per_token_per_layer(m, 2.0, tp) * m.num_layers
    return gpu_setup(m, gpu_figures(load_catalog().accelerator(gpu)), "bf16", kv, engine, tp, 1, 1)


def test_a_floor_is_read_per_architecture_and_the_largest_stands_for_the_others() -> None:
    ops = LayerOps(**_OPS, decode_floor_us={"hopper": 30.0, "ampere": 60.0}, decode_floor_fitted_on="runs")
    assert ops.floor_us("Hopper") == 30.0 and ops.floor_us("ampere") == 60.0
    assert ops.floor_us("Ada Lovelace") == 60.0
    assert LayerOps(**_OPS).floor_us("hopper") == 0.0
    with pytest.raises(ValueError, match="decode_floor_fitted_on"):
        LayerOps(**_OPS, decode_floor_us={"hopper": 30.0})


def test_only_the_old_release_profile_carries_the_floor_and_the_host_time() -> None:
    c = load_constants().engines
    floors = dict(c["vllm-0.6"].layer_ops.decode_floor_us)
    assert set(floors) == {"hopper", "ampere"} and c["vllm-0.6"].overlapped_host_us_per_seq > 0
    assert not c["vllm"].layer_ops.decode_floor_us and c["vllm"].overlapped_host_us_per_seq == 0
    # everything else is the current profile's (a YAML merge, not a copy that could drift)
    assert c["vllm-0.6"].linear_kernel == c["vllm"].linear_kernel and c["vllm-0.6"].moe_kernel == c["vllm"].moe_kernel
    layers = arch("llama-3.1-8b").num_layers
    assert _setup("llama-3.1-8b", "h100-sxm", "vllm").layer_floor_s == 0.0
    for gpu, key in (("h100-sxm", "hopper"), ("a100-80gb", "ampere"), ("l40s-48gb", "ampere")):
        s = _setup("llama-3.1-8b", gpu, "vllm-0.6")
        assert s.layer_floor_s == pytest.approx(floors[key] * 1e-6 * layers)
    # a MoE layer has the dense layer's attention, norms and share of sampling, so its floor too
    moe = _setup("mixtral-8x7b", "h100-sxm", "vllm-0.6", tp=2)
    assert moe.layer_floor_s == pytest.approx(floors["hopper"] * 1e-6 * arch("mixtral-8x7b").num_layers)


def test_the_floor_is_time_tp_does_not_divide() -> None:
    steps = {}
    for tp in (1, 8):
        s = _setup("llama-3.1-8b", "h100-sxm", "vllm-0.6", tp)
        steps[tp] = stage_step_s(s, 4, 500, 0, 0) - stage_step_s(replace(s, layer_floor_s=0.0), 4, 500, 0, 0)
    assert steps[1] == pytest.approx(steps[8]) and steps[1] > 0


def test_overlapped_host_time_bounds_a_full_step_from_below_and_leaves_small_ones() -> None:
    s = _setup("llama-3.1-8b", "h100-sxm", "vllm-0.6", tp=8)
    host = load_constants().engines["vllm-0.6"].overlapped_host_us_per_seq * 1e-6
    assert token_step_s(s, 256, 400, 0, 0) == pytest.approx(max(stage_step_s(s, 256, 400, 0, 0), 256 * host))
    assert token_step_s(s, 256, 400, 0, 0) == pytest.approx(256 * host)  # small model, tp 8: the host sets it
    assert token_step_s(s, 4, 400, 0, 0) == stage_step_s(s, 4, 400, 0, 0)
    current = _setup("llama-3.1-8b", "h100-sxm", "vllm", tp=8)
    assert token_step_s(current, 256, 400, 0, 0) == stage_step_s(current, 256, 400, 0, 0)


def test_the_low_load_extracts_agree_with_themselves() -> None:
    files = sorted(DATA.glob("lambda_v060/*_p10.json"))
    assert len(files) == 54
    for f in files:
        d = json.loads(f.read_text())
        assert d["num_prompts"] == 10 == len(d["input_lens"]) == len(d["output_lens"])
        assert sum(d["input_lens"]) == d["total_input_tokens"] and sum(d["output_lens"]) == d["total_output_tokens"]
        assert d["repo"] == "LambdaLabsML/vllm-benchmark" and d["path"].startswith("results/prompt_10/")


def test_the_fit_script_reproduces_the_profile() -> None:
    runs = vllm06_fit.low_load_runs()
    assert sum(not r.moe for r in runs) == 46 and sum(r.moe for r in runs) == 8
    assert vllm06_fit.fit(runs) == dict(load_constants().engines["vllm-0.6"].layer_ops.decode_floor_us)
    host, errs = vllm06_fit.fit_host()
    assert host == load_constants().engines["vllm-0.6"].overlapped_host_us_per_seq
    assert set(errs) == set(FITTED_ROWS) and all(abs(e) < 0.1 for e in errs.values())
    assert not constants_mod.OVERRIDE
    # what the floor buys on the runs it was fitted on, at every tp (it follows the layers, not the bytes read)
    for tp in (1, 2, 4, 8):
        dense = [r for r in runs if not r.moe and r.tp == tp]
        before = statistics.median(r.predicted_tpot_s(floor=False) / r.measured_tpot_s - 1 for r in dense)
        after = statistics.median(r.predicted_tpot_s() / r.measured_tpot_s - 1 for r in dense)
        assert before < -0.1 and abs(after) < 0.05, (tp, before, after)


def test_rows_of_a_release_with_its_own_profile_are_predicted_with_it() -> None:
    rows = {r["id"]: r for r in read_rows()}
    assert accuracy.release_profile(rows["EX0095"]) == "vllm-0.6"  # Lambda vLLM 0.6.0, --num-scheduler-steps 10
    assert accuracy.release_profile(rows["EX0023"]) == "vllm-0.6"  # sglang's vLLM 0.6.0 runs, multi-step too
    assert accuracy.release_profile(rows["EX0113"]) == "vllm-0.5"  # vLLM 0.7.2 benchmark_latency: V0 single-step
    assert accuracy.release_profile(rows["EX0011"]) == "vllm"  # vLLM 0.19.0: V1
    single = {**rows["EX0095"], "notes": "no scheduler flag", "engine_version": "0.6.3"}
    assert accuracy.release_profile(single) == "vllm-0.5"
    assert accuracy.release_profile({**single, "notes": "--num-scheduler-steps 8"}) == "vllm-0.6"
    assert accuracy.release_profile({**single, "notes": "--num-scheduler-steps 1"}) == "vllm-0.5"
    with accuracy.engine_profile("vllm-0.6"):
        assert load_constants().engines["vllm"] == load_constants().engines["vllm-0.6"]
    assert not constants_mod.OVERRIDE and not load_constants().engines["vllm"].layer_ops.decode_floor_us
    o = accuracy.evaluate_row(rows["EX0095"])
    with accuracy.engine_profile("vllm-0.6"):
        again = accuracy._current_vllm_row(rows["EX0095"], arch("mistral-7b-v0.3"),
                                           load_catalog().accelerator("h100-sxm"),
                                           accuracy.hardware_from_gpu(load_catalog().accelerator("h100-sxm"), 1),
                                           float(rows["EX0095"]["value"]))
    plain = accuracy._current_vllm_row(rows["EX0095"], arch("mistral-7b-v0.3"), load_catalog().accelerator("h100-sxm"),
                                       accuracy.hardware_from_gpu(load_catalog().accelerator("h100-sxm"), 1),
                                       float(rows["EX0095"]["value"]))
    assert o.predicted == again.predicted != plain.predicted


def test_fitted_rows_are_reported_apart_and_their_series_is_not_counted() -> None:
    rows = [r for r in read_rows() if "[tp series: lambda-v0.6.0-h100]" in r["notes"]]
    assert {r["id"] for r in rows if r["id"] in FITTED_ROWS} == set(FITTED_ROWS)
    assert not any(is_current_vllm_check(r) for r in rows if r["id"] in FITTED_ROWS)
    outcomes = [o for o in (accuracy.evaluate_row(r) for r in rows) if not isinstance(o, str)]
    assert {o.row_id for o in outcomes if o.group == FITTED_GROUP} == set(FITTED_ROWS)
    lines = tp_series_report(outcomes)
    llama = next(line for line in lines if "Meta-Llama-3-8B" in line)
    assert llama.endswith("(fitted)")
    # 7 series, 17 ratios; the fitted Llama-3-8B series (3 ratios) is not counted
    assert " of 14, " in lines[-1]


def test_the_v0_single_step_series_agrees_with_its_source_and_is_checked_per_batch() -> None:
    rows = [r for r in read_rows() if "[tp series: vllm-0.7.2-qwq-a100]" in r["notes"]]
    assert [r["id"] for r in rows] == [f"EX{n:04d}" for n in range(113, 120)]
    for r in rows:  # TPOT = the quoted batch latency / 200 output tokens
        latency = float(r["notes"].split(f"tp={r['tp']}: '")[1].split("s'")[0])
        assert float(r["value"]) == round(latency / 200 * 1000, 2)
        assert (r["input_len"], r["output_len"], r["metric"]) == ("1", "200", "tpot_ms")
    outcomes = [o for o in (accuracy.evaluate_row(r) for r in rows) if not isinstance(o, str)]
    assert len(outcomes) == 7
    lines = tp_series_report(outcomes)
    batch16 = next(line for line in lines if "QwQ-32B batch 16" in line)
    by_tp = {int(r["tp"]): o for r, o in zip(rows, outcomes, strict=True) if r["concurrency"] == "16"}
    measured = by_tp[2].measured / by_tp[8].measured  # speed ratio = inverse TPOT ratio
    predicted = by_tp[2].predicted / by_tp[8].predicted
    assert f"tp8/tp2 {measured:.2f} vs {predicted:.2f} ({predicted / measured - 1:+.0%})" in batch16
    assert not any("batch 128" in line for line in lines)  # one tp only: no ratio


def test_rows_a_profile_was_fitted_on_never_feed_another_fit() -> None:
    rows = {r["id"]: r for r in read_rows()}
    assert accuracy.is_fitted_vllm_row(rows["EX0091"]) and not accuracy.is_current_vllm_check(rows["EX0091"])
    fed = {o.row_id for o in accuracy.evaluate_all(("vLLM",))[0]}
    assert fed and not fed & set(FITTED_ROWS)
    assert not fed & {r["id"] for r in rows.values() if accuracy.is_current_vllm_check(r)}
