"""`infragen calibrate` and `--calibration`: factor fitting within bounds, the profile file, applying it."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml

from infragen.architecture import ModelArchitecture
from infragen.cli import main
from infragen.sizing.calibration import (
    MIN_FACTOR,
    Observation,
    fit_calibration,
    fit_factor,
    fit_factors,
    phased,
    physical_bounds,
    vllm_peak_fractions,
)
from infragen.sizing.constants import load_constants
from infragen.sizing.estimate import estimate
from infragen.sizing.hardware import hardware_from_gpu
from tests.sizing.conftest import LLAMA3_8B, MIXTRAL, gpu

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "calibration"
BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "llama_bench"


def _obs(measured: float, predicted: float, phase: str = "decode") -> Observation:
    return Observation("t", "m", phase, measured, predicted)  # type: ignore[arg-type]


def test_factor_is_the_median_ratio_within_bounds() -> None:
    assert fit_factor([_obs(12, 10), _obs(11, 10), _obs(30, 10)], "decode", (0.2, 2.0)) == pytest.approx(1.2)
    assert fit_factor([_obs(50, 10)], "decode", (0.2, 1.5)) == 1.5  # never past 100 % of the peak
    assert fit_factor([_obs(1, 10)], "decode", (MIN_FACTOR, 2.0)) == MIN_FACTOR
    assert fit_factor([_obs(12, 10)], "prefill", (0.2, 2.0)) == 1.0  # no prefill observation: unchanged


def test_bounds_are_100_percent_of_the_peak() -> None:
    b = physical_bounds("vllm")
    assert b["decode"][1] > 1.0 and b["prefill"][1] > 1.0
    assert physical_bounds("llama.cpp", bandwidth_measured=False)["decode"][1] == pytest.approx(1 / 0.65)


def _vllm_bounds(model: ModelArchitecture, precision: str) -> dict[str, tuple[float, float]]:
    hw = hardware_from_gpu(gpu(), 1)
    return physical_bounds("vllm", fractions=vllm_peak_fractions(model, hw, precision, tp=1))  # type: ignore


def test_vllm_bounds_follow_the_kernels_the_setup_runs() -> None:
    # a factor may take the fastest-modelled kernel of the calibrated setup to 100 % of its peak, no further
    e = load_constants().engines["vllm"]
    lk, moe = e.linear_kernel, e.moe_kernel
    assert lk is not None and moe is not None
    bf16 = _vllm_bounds(LLAMA3_8B, "bf16")  # 16-bit linears: the measured cuBLAS kernel's fractions
    assert bf16["decode"][1] == pytest.approx(1 / max(lk.read_fraction, e.kv_bandwidth_fraction))
    assert bf16["prefill"][1] == pytest.approx(1 / lk.compute_fraction)
    fp8 = _vllm_bounds(LLAMA3_8B, "fp8")  # per-tensor W8A8 on fp8 tensor cores
    assert fp8["prefill"][1] == pytest.approx(1 / max(lk.fp8_compute_fraction, e.prefill_compute_fraction))
    awq = _vllm_bounds(LLAMA3_8B, "int4-awq")  # weight-only (Marlin): the fitted roofline fractions
    assert awq["decode"][1] == pytest.approx(1 / max(e.decode_bandwidth_fraction, e.kv_bandwidth_fraction))
    assert awq["prefill"][1] == pytest.approx(1 / e.prefill_compute_fraction)
    mixtral = _vllm_bounds(MIXTRAL, "bf16")  # routed experts: the measured fused-MoE kernel reads at its fraction
    assert mixtral["decode"][1] == pytest.approx(1 / max(moe.read_fraction, lk.read_fraction))
    # without a setup: the tightest bound over every kernel the engine's profile models
    anyone = physical_bounds("vllm")
    for b in (bf16, fp8, awq, mixtral):
        assert anyone["decode"][1] <= b["decode"][1] and anyone["prefill"][1] <= b["prefill"][1]


def test_factors_scale_vllm_speed() -> None:
    hw = hardware_from_gpu(gpu(), 1)
    kw = dict(precision="bf16", input_len=1000, output_len=200, concurrency=8)
    base = estimate(LLAMA3_8B, hw, **kw)  # type: ignore[arg-type]
    fast = estimate(LLAMA3_8B, hw, decode_factor=2.0, **kw)  # type: ignore[arg-type]
    assert fast.tpot_ms == pytest.approx(base.tpot_ms / 2)
    assert fast.output_tokens_per_s == pytest.approx(2 * base.output_tokens_per_s)
    assert any("calibrated" in n for n in fast.notes) and not any("calibrated" in n for n in base.notes)
    prefill = estimate(LLAMA3_8B, hw, prefill_factor=2.0, **kw)  # type: ignore[arg-type]
    assert prefill.ttft_ms < base.ttft_ms and prefill.tpot_ms == pytest.approx(base.tpot_ms)


def _calibrate(tmp_path: Path, files: list[Path], *extra: str) -> Path:
    out = tmp_path / "profile.yaml"
    main(["calibrate", *map(str, files), *extra, "-o", str(out)])
    return out


def test_vllm_result_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = _calibrate(tmp_path, [FIXTURES / "vllm-bench-serve-format.json"], "--model", "llama-3.1-8b",
                     "--precision", "bf16", "--gpu", "h100-sxm", "--gpus", "1")
    profile = yaml.safe_load(out.read_text())
    assert profile["engine"] == "vllm" and profile["hardware"] == "1 x h100-sxm-80gb"
    assert profile["gpus"] == "1 x h100-sxm-80gb"  # holds for any machine with one H100 (a vLLM estimate's view)
    assert len(profile["inputs"][0]["sha256"]) == 64
    metrics = {r["metric"] for r in profile["residuals"]}
    assert metrics == {"output_throughput", "median_tpot_ms", "median_ttft_ms"}
    tpot = next(r for r in profile["residuals"] if r["metric"] == "median_tpot_ms")
    assert tpot["measured"] == pytest.approx(21.0)
    assert "median error" in capsys.readouterr().err
    # applied: estimate says so and changes TPOT by the factor
    args = ["estimate", "--model", "llama-3.1-8b", "--precision", "bf16", "--gpu", "h100-sxm", "--gpus", "1",
            "--input-len", "1000", "--output-len", "200", "--concurrency", "16", "--format", "json"]
    main(args)
    plain = json.loads(capsys.readouterr().out)
    main([*args, "--calibration", str(out)])
    captured = capsys.readouterr()
    calibrated = json.loads(captured.out)
    assert f"calibration {out} applied" in captured.err and "before" in captured.err
    assert calibrated["latency"]["tpot_ms"] == pytest.approx(
        plain["latency"]["tpot_ms"] / profile["decode_factor"], rel=1e-3)


def test_profile_for_other_hardware_or_engine_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = _calibrate(tmp_path, [FIXTURES / "vllm-bench-serve-format.json"], "--model", "llama-3.1-8b",
                     "--precision", "bf16", "--gpu", "h100-sxm", "--gpus", "1")
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(["estimate", "--model", "llama-3.1-8b", "--precision", "bf16", "--gpu", "a100-80gb", "--gpus", "1",
              "--input-len", "100", "--output-len", "100", "--concurrency", "1", "--calibration", str(out)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "hardware" in err and "1 x h100-sxm-80gb" in err


@pytest.mark.parametrize("text, needle", [("not json", "not JSON"), ('{"a": 1}', "neither"),
                                          ("[]", "neither")])
def test_bad_result_files_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, needle: str) -> None:
    bad = tmp_path / "r.json"
    bad.write_text(text)
    with pytest.raises(SystemExit) as exc:
        main(["calibrate", str(bad), "--model", "llama-3.1-8b", "--gpu", "h100-sxm"])
    assert exc.value.code == 2
    assert needle in capsys.readouterr().err


def test_bad_profile_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "p.yaml"
    bad.write_text("engine: vllm\nhardware: x\ndecode_factor: -1\n")
    with pytest.raises(SystemExit) as exc:
        main(["estimate", "--model", "llama-3.1-8b", "--precision", "bf16", "--gpu", "h100-sxm",
              "--input-len", "100", "--output-len", "100", "--concurrency", "1", "--calibration", str(bad)])
    assert exc.value.code == 2
    assert "decode_factor" in capsys.readouterr().err


def _ttft_model(d: float, p: float) -> float:
    """A 30 ms TTFT as a rate: 20 ms of prompt (scaled by the prompt factor) and 10 ms of the rest (generation)."""
    return 1e3 / (20.0 / p + 10.0 / d)


def test_a_time_is_fitted_through_the_phase_it_feeds() -> None:
    # measured 40 ms: only the 20 ms prompt part may stretch, so the prompt factor is 20 / 30, not 30 / 40
    o = Observation("r", "median_ttft_ms", "prefill", 1e3 / 40.0, _ttft_model(1, 1), as_time=True, model=_ttft_model)
    decode, prefill = fit_factors([o], {"decode": (0.2, 2.0), "prefill": (0.2, 2.0)})
    assert decode == 1.0 and prefill == pytest.approx(20.0 / 30.0, rel=1e-4)
    assert _ttft_model(decode, prefill) == pytest.approx(1e3 / 40.0, rel=1e-4)  # the calibrated figure is measured
    # without the model the ratio stands in (a figure calibrate cannot re-predict)
    plain = Observation("r", "median_ttft_ms", "prefill", 1e3 / 40.0, _ttft_model(1, 1), as_time=True)
    assert fit_factors([plain], {"decode": (0.2, 2.0), "prefill": (0.2, 2.0)})[1] == pytest.approx(0.75)


def test_generation_is_fitted_first_and_the_prompt_factor_on_top_of_it() -> None:
    tpot = Observation("r", "median_tpot_ms", "decode", 1e3 / 12.5, 1e3 / 10.0, as_time=True,
                       model=lambda d, p: 1e3 / (10.0 / d))
    ttft = Observation("r", "median_ttft_ms", "prefill", 1e3 / 32.5, _ttft_model(1, 1), as_time=True,
                       model=_ttft_model)
    decode, prefill = fit_factors([tpot, ttft], {"decode": (0.2, 2.0), "prefill": (0.2, 2.0)})
    assert decode == pytest.approx(0.8, rel=1e-4)  # TPOT 10 -> 12.5 ms
    assert prefill == pytest.approx(1.0, rel=1e-4)  # the 2.5 ms more of TTFT is the slower generation's part


def test_a_figure_the_bounds_cannot_reach_is_held_at_the_bound() -> None:
    o = Observation("r", "median_ttft_ms", "prefill", 1e3 / 10.0, _ttft_model(1, 1), as_time=True, model=_ttft_model)
    assert fit_factors([o], {"decode": (0.2, 2.0), "prefill": (0.2, 2.0)})[1] == 2.0  # 10 ms < the 10 ms rest


PUBLISHED = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "vllm_results"
ONLINE = PUBLISHED / "llm-d-4xl40s-llama-3.2-3b-results.jsonl"
L40S = ["--model", str(PUBLISHED / "llama-3.2-3b-instruct-config.json"), "--precision", "bf16", "--gpu", "l40s",
        "--gpus", "1", "--replicas", "4"]


def test_a_solver_past_saturation_still_finds_the_factor() -> None:
    # a load model past saturation at the uncalibrated speed predicts an infinite time (a rate of 0)
    def model(d: float, p: float) -> float:
        return 0.0 if d < 1.2 else 1e3 / (10.0 / d)

    o = Observation("r", "median_tpot_ms", "decode", 1e3 / 7.0, model(1, 1), as_time=True, model=model)
    decode, _ = fit_factors([o], {"decode": (0.2, 2.0), "prefill": (0.2, 2.0)})
    assert decode == pytest.approx(10.0 / 7.0, rel=1e-4)


def test_published_online_results_are_fitted_with_the_load_model(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    # a real published file (benchmarks/data/vllm_results/sources.yaml): nine runs, one JSON line each, four engines
    import sys

    sys.path.insert(0, str(PUBLISHED.parents[1]))
    import online_rate_check

    out = _calibrate(tmp_path, [ONLINE], *L40S)
    profile = yaml.safe_load(out.read_text())
    assert profile["inputs"][0]["sha256"] == hashlib.sha256(ONLINE.read_bytes()).hexdigest()
    assert profile["inputs"][0]["engines"] == 4
    first = online_rate_check.online_runs()[0]  # no-features at 10 requests/s: 2.5/s per engine
    tpot = next(r for r in profile["residuals"] if r["source"].startswith(f"{ONLINE.name}[0]")
                and r["metric"] == "median_tpot_ms")
    assert tpot["measured"] == pytest.approx(first.measured["median_tpot_ms"])
    assert tpot["before"] == pytest.approx(first.point()["median_tpot_ms"], rel=1e-6)  # estimate --rate's figure
    assert "2.5/s per engine" in tpot["source"]
    # an online run's output throughput is its arrival rate's, not a speed: not fitted
    assert not any(r["metric"] == "output_throughput" and "/s per engine" in r["source"]
                   for r in profile["residuals"])
    assert "median error" in capsys.readouterr().err
    # Llama-3.2-3B bf16 on the L40S runs the measured 16-bit linears: bounded where they reach 100 % of the peaks
    lk = load_constants().engines["vllm"].linear_kernel
    assert lk is not None
    assert profile["prefill_bounds"][1] == pytest.approx(1 / lk.compute_fraction, abs=1e-4)
    assert profile["decode_bounds"][1] == pytest.approx(1 / lk.read_fraction, abs=1e-4)


def test_one_published_online_run_is_reproduced_after_calibration(tmp_path: Path) -> None:
    one = tmp_path / "run.json"
    one.write_text(ONLINE.read_text().splitlines()[0])
    profile = yaml.safe_load(_calibrate(tmp_path, [one], *L40S).read_text())
    after = {r["metric"]: r["after"] / r["measured"] - 1 for r in profile["residuals"]}
    assert set(after) == {"median_tpot_ms", "median_ttft_ms"}
    assert all(abs(e) < 1e-3 for e in after.values())  # one TPOT, one TTFT: both solved exactly
    before = {r["metric"]: r["before"] / r["measured"] - 1 for r in profile["residuals"]}
    assert any(abs(e) > 0.01 for e in before.values())  # the calibration had something to correct


def test_closed_loop_result_without_e2e_latency_uses_ttft_and_tpot(tmp_path: Path) -> None:
    line = json.loads(ONLINE.read_text().splitlines()[2])  # request_rate inf: a closed burst, no mean_e2el_ms
    assert line["request_rate"] == "inf" and "mean_e2el_ms" not in line
    one = tmp_path / "burst.json"
    one.write_text(json.dumps(line))
    profile = yaml.safe_load(_calibrate(tmp_path, [one], *L40S).read_text())
    assert {r["metric"] for r in profile["residuals"]} >= {"output_throughput", "median_tpot_ms"}


def test_real_llama_bench_file_of_this_machine(tmp_path: Path) -> None:
    run = BENCH / "llama-bench-llama3.2-3b-q4_0-2026-12-04b.json"
    out = _calibrate(tmp_path, [run], "--model", str(BENCH / "llama-3.2-3b-config.json"), "--hardware",
                     str(BENCH / "machine-2026-12-04b.yaml"))
    profile = yaml.safe_load(out.read_text())
    record = json.loads(run.read_text())
    assert profile["engine"] == "llama.cpp" and profile["inputs"][0]["kind"] == "llama-bench"
    measured = sorted(r["measured"] for r in profile["residuals"])
    assert measured == pytest.approx(sorted(r["avg_ts"] for r in record["results"]))
    for r in profile["residuals"]:  # one tg and one pp: each moves to its measurement, within the bounds
        assert abs(r["after"] / r["measured"] - 1) <= abs(r["before"] / r["measured"] - 1) + 1e-9
    tg = next(r for r in profile["residuals"] if r["metric"].startswith("tg"))
    assert tg["after"] == pytest.approx(tg["measured"], rel=1e-3)
    # pp512 Q4_0 needs x1.14: past the prompt bound (1 / prompt_flops_fraction), so held there
    assert profile["prefill_factor"] == pytest.approx(profile["prefill_bounds"][1])


def test_llama_cpp_profile_holds_only_on_the_cpu_it_was_measured_on(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    # the three probed hardware files of benchmarks/data/llama_bench share the name "probed AMD EPYC (2 cores)"
    config = str(BENCH / "llama-3.2-3b-config.json")
    out = _calibrate(tmp_path, [BENCH / "llama-bench-llama3.2-3b-q4_0-2026-12-04b.json"], "--model", config,
                     "--hardware", str(BENCH / "machine-2026-12-04b.yaml"))
    assert yaml.safe_load(out.read_text())["cpu"] == "amd family 25 model 17, 2 vCPUs"
    capsys.readouterr()
    args = ["estimate", "--model", config, "--precision", "q4_0", "--input-len", "1", "--output-len", "128",
            "--concurrency", "1", "--calibration", str(out)]
    main([*args, "--hardware", str(BENCH / "machine-2026-12-04.yaml")])  # the same CPU, probed another day
    assert f"calibration {out} applied" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main([*args, "--hardware", str(BENCH / "machine.yaml")])  # the same name, another CPU
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "hardware" in err and "family 25 model 17" in err and "family 25 model 1," in err


def _burst_doc(ins: list[int], outs: list[int], tok_per_s: float, detailed: bool = True) -> dict[str, object]:
    """A `vllm bench serve --save-result` burst (no --request-rate, no --max-concurrency), `--save-detailed` or not."""
    doc: dict[str, object] = {
        "completed": len(ins), "total_input_tokens": sum(ins), "total_output_tokens": sum(outs),
        "request_rate": "inf", "max_concurrency": None, "output_throughput": tok_per_s,
        "request_throughput": tok_per_s / (sum(outs) / len(outs)), "mean_e2el_ms": 20_000.0,
        "median_tpot_ms": 30.0, "median_ttft_ms": 5_000.0}
    if detailed:
        doc |= {"input_lens": [*ins, 200], "output_lens": [*outs, 0]}  # the last request failed: no tokens
    return doc


BURST_INS = [200 + 37 * (i % 11) for i in range(300)]
BURST_OUTS = [8 + (i * 97) % 900 for i in range(300)]  # long-tailed enough: 8 .. 907 tokens


def test_a_detailed_burst_is_replayed_as_the_drain_it_was(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from infragen.catalog import load_catalog
    from infragen.catalog.models import load_model_registry
    from infragen.sizing.drain import burst_drain

    model = load_model_registry()["llama-3.1-8b"]
    hw = hardware_from_gpu(load_catalog().accelerator("h100-sxm"), 1)
    replay = burst_drain(model, hw, precision="bf16", tp=1, input_lens=BURST_INS, output_lens=BURST_OUTS)
    steady = estimate(model, hw, precision="bf16", input_len=round(sum(BURST_INS) / 300),
                      output_len=round(sum(BURST_OUTS) / 300), concurrency=None)
    assert replay.result.output_tokens_per_s < 0.9 * steady.output_tokens_per_s  # the tail runs a small batch
    measured = 0.8 * replay.result.output_tokens_per_s
    f = tmp_path / "burst.json"
    f.write_text(json.dumps(_burst_doc(BURST_INS, BURST_OUTS, measured)))
    profile = yaml.safe_load(_calibrate(tmp_path, [f], "--model", "llama-3.1-8b", "--precision", "bf16",
                                        "--gpu", "h100-sxm", "--gpus", "1").read_text())
    [row] = profile["residuals"]  # a burst's TTFT and TPOT hold its queueing: only its throughput is fitted
    assert row["metric"] == "output_throughput" and "burst of 300 requests replayed" in row["source"]
    assert row["before"] == pytest.approx(replay.result.output_tokens_per_s)
    assert row["after"] == pytest.approx(measured, rel=1e-3)
    assert profile["decode_factor"] < 0.8  # the prompt tokens' share keeps the prompt factor (1: no TTFT fitted)
    assert "sent every request at once" not in capsys.readouterr().err


def test_a_burst_without_lengths_is_calibrated_at_its_average_batch_and_says_so(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "burst.json"
    f.write_text(json.dumps(_burst_doc(BURST_INS, BURST_OUTS, 3000.0, detailed=False)))
    profile = yaml.safe_load(_calibrate(tmp_path, [f], "--model", "llama-3.1-8b", "--precision", "bf16",
                                        "--gpu", "h100-sxm", "--gpus", "1").read_text())
    assert {r["metric"] for r in profile["residuals"]} >= {"output_throughput", "median_tpot_ms"}
    err = capsys.readouterr().err
    assert "sent every request at once" in err and "--save-detailed" in err


@pytest.mark.parametrize("lens", [{"input_lens": [1, 2], "output_lens": [3]}, {"input_lens": "x", "output_lens": []},
                                  {"input_lens": [1, -2], "output_lens": [3, 4]},
                                  {"input_lens": [1, True], "output_lens": [3, 4]}])
def test_malformed_request_lengths_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         lens: dict[str, object]) -> None:
    f = tmp_path / "burst.json"
    f.write_text(json.dumps(_burst_doc(BURST_INS, BURST_OUTS, 3000.0, detailed=False) | lens))
    with pytest.raises(SystemExit) as exc:
        _calibrate(tmp_path, [f], "--model", "llama-3.1-8b", "--precision", "bf16", "--gpu", "h100-sxm", "--gpus", "1")
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "burst.json" in err and "input_lens" in err and "Traceback" not in err


def test_a_detailed_closed_loop_is_replayed_with_its_tail(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from infragen.catalog import load_catalog
    from infragen.catalog.models import load_model_registry
    from infragen.sizing.drain import burst_drain

    model = load_model_registry()["llama-3.1-8b"]
    hw = hardware_from_gpu(load_catalog().accelerator("h100-sxm"), 1)
    replay = burst_drain(model, hw, precision="bf16", tp=1, input_lens=BURST_INS, output_lens=BURST_OUTS, clients=16)
    mean_in, mean_out = round(sum(BURST_INS) / 300), round(sum(BURST_OUTS) / 300)
    steady = estimate(model, hw, precision="bf16", input_len=mean_in, output_len=mean_out, concurrency=16)
    assert replay.result.output_tokens_per_s < 0.95 * steady.output_tokens_per_s  # the loop's tail
    measured = 0.9 * replay.result.output_tokens_per_s
    doc = _burst_doc(BURST_INS, BURST_OUTS, measured) | {"max_concurrency": 16, "median_tpot_ms": steady.tpot_ms,
                                                                  "median_ttft_ms": steady.ttft_ms}
    f = tmp_path / "loop.json"
    f.write_text(json.dumps(doc))
    profile = yaml.safe_load(_calibrate(tmp_path, [f], "--model", "llama-3.1-8b", "--precision", "bf16",
                                        "--gpu", "h100-sxm", "--gpus", "1").read_text())
    rows = {r["metric"]: r for r in profile["residuals"]}
    assert "closed loop of 300 requests replayed (16 clients" in rows["output_throughput"]["source"]
    assert rows["output_throughput"]["before"] == pytest.approx(replay.result.output_tokens_per_s)
    assert rows["median_tpot_ms"]["before"] == pytest.approx(steady.tpot_ms)  # TPOT: the steady state at 16
    assert "no per-request lengths" not in capsys.readouterr().err  # no note: the lengths were there


def test_a_closed_loop_without_lengths_is_a_steady_state_and_says_so(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "loop.json"
    f.write_text(json.dumps(_burst_doc(BURST_INS, BURST_OUTS, 3000.0, detailed=False) | {"max_concurrency": 16}))
    profile = yaml.safe_load(_calibrate(tmp_path, [f], "--model", "llama-3.1-8b", "--precision", "bf16",
                                        "--gpu", "h100-sxm", "--gpus", "1").read_text())
    [row] = [r for r in profile["residuals"] if r["metric"] == "output_throughput"]
    assert row["source"].endswith("loop.json")
    err = capsys.readouterr().err
    assert "closed loop of 16 clients" in err and "--save-detailed" in err


def _ttft_at(prompt_ms: float, serving_ms: float = 10.0, rest_ms: float = 5.0):  # type: ignore[no-untyped-def]
    """A TTFT as a rate: `prompt_ms` of prefill (scaled by the prompt factor), a serving path, a generation rest."""
    return lambda d, p: 1e3 / (serving_ms + prompt_ms / p + rest_ms / d)


def _ttft_obs(measured_ms: float, prompt_ms: float) -> Observation:
    model = _ttft_at(prompt_ms)
    return Observation("r", "median_ttft_ms", "prefill", 1e3 / measured_ms, model(1, 1), as_time=True, model=model,
                       serving_path=True)


def test_a_short_prompt_ttft_fits_the_serving_path_not_the_prompt_speed() -> None:
    bounds = {"decode": (0.2, 2.0), "prefill": (0.2, 2.0)}
    # 5 ms of prefill in a 20 ms TTFT measured at 60 ms: the path is 50 ms, not a prompt 9x slower (held at 0.2)
    short = _ttft_obs(60.0, 5.0)
    assert fit_factors([short], bounds)[1] == 0.2  # what the prompt factor alone would make of it
    fit = fit_calibration([short], bounds, default_serving_ms=10.0)
    assert fit.prefill == 1.0 and fit.serving_ms == pytest.approx(50.0) and fit.serving_delta_ms == pytest.approx(40)
    assert 1e3 / short.shifted(fit.serving_delta_ms).model(1.0, 1.0) == pytest.approx(60.0)  # type: ignore[misc]
    # with a long prompt measured too, the prompt factor comes from it, on top of the fitted path
    # (a 50 ms path and prefill at 0.8x the model's speed, in a 400 ms prompt and in the short one's 5 ms)
    long, short = _ttft_obs(50.0 + 400.0 / 0.8 + 5.0, 400.0), _ttft_obs(50.0 + 5.0 / 0.8 + 5.0, 5.0)
    fit = fit_calibration([short, long], bounds, default_serving_ms=10.0)
    assert fit.serving_ms == pytest.approx(50.0, rel=1e-3) and fit.prefill == pytest.approx(0.8, rel=1e-3)
    # a long prompt alone: the prompt factor, the default path (a prefill-dominated TTFT says little of the path)
    fit = fit_calibration([long], bounds, default_serving_ms=10.0)
    assert fit.serving_ms is None and fit.prefill < 0.8
    # a path is at least nothing: a short TTFT faster than the model's path gives 0, not a negative time
    assert fit_calibration([_ttft_obs(8.0, 5.0)], bounds, default_serving_ms=10.0).serving_ms == 0.0


def test_a_time_past_saturation_stays_infinite_when_the_path_moves() -> None:
    o = Observation("r", "median_ttft_ms", "prefill", 20.0, 0.0, as_time=True, model=lambda d, p: 0.0,
                    serving_path=True)
    assert o.shifted(25.0).predicted == 0.0 and o.shifted(25.0).model(1.0, 1.0) == 0.0  # type: ignore[misc]
    plain = Observation("r", "median_tpot_ms", "decode", 50.0, 40.0, as_time=True)
    assert plain.shifted(25.0) is plain  # a TPOT holds no serving path


def test_a_calibrated_serving_path_moves_every_ttft_by_its_difference_and_nothing_else() -> None:
    hw = hardware_from_gpu(gpu(), 1)
    kw = dict(precision="bf16", input_len=4000, output_len=200, concurrency=8)
    plain = estimate(LLAMA3_8B, hw, **kw)  # type: ignore[arg-type]
    moved = estimate(LLAMA3_8B, hw, serving_overhead_ms=45.0, **kw)  # type: ignore[arg-type]
    default = load_constants().engines["vllm"].first_token_overhead_ms
    assert moved.ttft_ms == pytest.approx(plain.ttft_ms + 45.0 - default)
    assert moved.tpot_ms == plain.tpot_ms and moved.output_tokens_per_s == plain.output_tokens_per_s
    assert any("serving path 45.0 ms" in n for n in moved.notes)
    from infragen.sizing.load_estimate import LoadModel, prepare_load

    loads = [prepare_load(LLAMA3_8B, hw, precision="bf16", input_len=4000, output_len=200, serving_overhead_ms=ms)
             for ms in (None, 45.0)]
    assert isinstance(loads[0], LoadModel) and isinstance(loads[1], LoadModel)
    a, b = (load.at(2.0, quantiles=(0.5,)) for load in loads)
    assert b.ttft_p50_s == pytest.approx(a.ttft_p50_s + (45.0 - default) * 1e-3)


def test_calibrating_on_a_short_prompt_run_learns_the_serving_path(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    # a closed loop of one client, 200-token prompts: its TTFT is mostly the serving path (made-up figures)
    hw = hardware_from_gpu(gpu(), 1)
    one = estimate(LLAMA3_8B, hw, precision="bf16", input_len=200, output_len=200, concurrency=1)
    result = {"_comment": "made up for the test", "request_rate": "inf", "max_concurrency": 1, "completed": 50,
              "total_input_tokens": 50 * 200, "total_output_tokens": 50 * 200, "request_throughput": 0.2,
              "output_throughput": 1e3 / one.tpot_ms, "median_ttft_ms": one.ttft_ms + 50.0,
              "median_tpot_ms": one.tpot_ms, "mean_e2el_ms": one.e2e_ms + 50.0}
    path = tmp_path / "short.json"
    path.write_text(json.dumps(result))
    out = _calibrate(tmp_path, [path], "--model", "llama-3.1-8b", "--precision", "bf16", "--gpu", "h100-sxm",
                     "--gpus", "1")
    profile = yaml.safe_load(out.read_text())
    default = load_constants().engines["vllm"].first_token_overhead_ms
    assert profile["prefill_factor"] == 1.0  # the prompt speed is not what the TTFT measured
    assert profile["serving_overhead_ms"] == pytest.approx(default + 50.0, abs=0.05)
    assert "serving path" in capsys.readouterr().err
    ttft = next(r for r in profile["residuals"] if r["metric"] == "median_ttft_ms")
    assert ttft["after"] == pytest.approx(ttft["measured"], rel=1e-3)
    # applied to a long prompt: the path is added once, the prompt's own time is the model's
    args = ["estimate", "--model", "llama-3.1-8b", "--precision", "bf16", "--gpu", "h100-sxm", "--gpus", "1",
            "--input-len", "8000", "--output-len", "200", "--concurrency", "1", "--format", "json"]
    main(args)
    plain = json.loads(capsys.readouterr().out)
    main([*args, "--calibration", str(out)])
    calibrated = json.loads(capsys.readouterr().out)
    assert calibrated["latency"]["ttft_ms"] == pytest.approx(plain["latency"]["ttft_ms"] + 50.0, abs=0.2)


def _run_rate(prompt_s: float, gen_s: float):  # type: ignore[no-untyped-def]
    """A run's output rate (1000 tokens) as a model: `prompt_s` of prefill, `gen_s` of generation."""
    return lambda d, p: 1000.0 / (prompt_s / p + gen_s / d)


def test_a_run_spent_prefilling_calibrates_the_prompt_speed() -> None:
    bounds = {"decode": (0.2, 2.0), "prefill": (0.2, 2.0)}
    prompt_bound = _run_rate(8.0, 2.0)  # a burst of long prompts (or of 4-token replies): 80 % prefill
    o = Observation("r", "output_throughput", "decode", 1000.0 / 12.0, prompt_bound(1, 1), model=prompt_bound,
                    whole_run=True)
    [moved] = phased([o])
    assert moved.phase == "prefill"
    fit = fit_calibration([o], bounds)  # 2 s more: the 8 s of prefill took 10, generation as modelled
    assert fit.decode == 1.0 and fit.prefill == pytest.approx(0.8, rel=1e-4)
    generation_bound = _run_rate(2.0, 8.0)
    g = Observation("r", "output_throughput", "decode", 1000.0 / 12.0, generation_bound(1, 1),
                    model=generation_bound, whole_run=True)
    assert phased([g])[0].phase == "decode"
    assert fit_calibration([g], bounds).decode == pytest.approx(0.8, rel=1e-4)
    # a TPOT is generation whatever its share (not a whole run)
    tpot = Observation("r", "median_tpot_ms", "decode", 20.0, 25.0, as_time=True, model=prompt_bound)
    assert phased([tpot]) == [tpot]


def test_a_burst_of_long_prompts_is_calibrated_as_prompt_speed(tmp_path: Path) -> None:
    from infragen.catalog import load_catalog
    from infragen.catalog.models import load_model_registry
    from infragen.sizing.drain import burst_drain

    model = load_model_registry()["llama-3.1-8b"]
    hw = hardware_from_gpu(load_catalog().accelerator("h100-sxm"), 1)
    ins, outs = [4000] * 200, [20] * 200
    replay = burst_drain(model, hw, precision="bf16", tp=1, input_lens=ins, output_lens=outs)
    assert replay.result.prompt_s > 0.5 * replay.result.duration_s  # the replay spends it prefilling
    f = tmp_path / "long.json"
    f.write_text(json.dumps(_burst_doc(ins, outs, 0.8 * replay.result.output_tokens_per_s)))
    profile = yaml.safe_load(_calibrate(tmp_path, [f], "--model", "llama-3.1-8b", "--precision", "bf16",
                                        "--gpu", "h100-sxm", "--gpus", "1").read_text())
    [row] = profile["residuals"]
    assert row["phase"] == "prefill" and row["after"] == pytest.approx(row["measured"], rel=1e-3)
    assert profile["decode_factor"] == 1.0 and profile["prefill_factor"] < 0.8


def test_a_run_that_stopped_generating_is_named_before_it_is_calibrated_on(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # --save-detailed keeps each request's inter-token gaps: Lambda's Mixtral runs stopped for seconds (a compile)
    from infragen.cli.calibrate_cmd import generation_stops

    steady = [[0.04] * 50 for _ in range(20)]
    assert generation_stops({"itls": steady}) is None
    paused = [row[:] for row in steady]
    paused[0][1], paused[3][7] = 4.97, 1.3
    assert generation_stops({"itls": paused}) == (2, 4.97, 0.04)
    assert generation_stops({"itls": [[0.04, 0.9], [0.04] * 40]}) is None  # under a second: a prefill step
    for junk in ("x", [1, 2], [["a"]], [[-1.0, 2.0]], [[]]):
        assert generation_stops({"itls": junk}) is None  # not a list of gap lists: not checked, not fitted
    f = tmp_path / "burst.json"
    doc = _burst_doc(BURST_INS, BURST_OUTS, 1000.0)
    doc["itls"] = paused
    f.write_text(json.dumps(doc))
    _calibrate(tmp_path, [f], "--model", "llama-3.1-8b", "--precision", "bf16", "--gpu", "h100-sxm", "--gpus", "1")
    err = capsys.readouterr().err
    assert "stopped generating 2 time(s) for up to 4.97 s" in err and "warm" in err
    doc.pop("itls")
    f.write_text(json.dumps(doc))
    _calibrate(tmp_path, [f], "--model", "llama-3.1-8b", "--precision", "bf16", "--gpu", "h100-sxm", "--gpus", "1")
    assert "stopped generating" not in capsys.readouterr().err


def test_a_floor_raises_a_factor_and_never_lowers_it() -> None:
    # an online run past the model's capacity proves only that the engine served at least its throughput
    def capacity(d: float, p: float) -> float:
        return 1000.0 * d

    bounds = {"decode": (0.2, 2.0), "prefill": (0.2, 2.0)}
    above = Observation("r", "output_throughput_floor", "decode", 1200.0, 1000.0, model=capacity, at_least=True)
    below = Observation("r", "output_throughput_floor", "decode", 800.0, 1000.0, model=capacity, at_least=True)
    assert fit_factors([above], bounds)[0] == pytest.approx(1.2, rel=1e-4)
    assert fit_factors([below], bounds)[0] == 1.0
    slow = Observation("t", "median_tpot_ms", "decode", 1e3 / 12.5, 1e3 / 10.0, as_time=True,
                       model=lambda d, p: 1e2 * d)  # a TPOT 25 % slower than modelled: x0.8
    assert fit_factors([slow, below], bounds)[0] == pytest.approx(0.8, rel=1e-4)  # 800 tok/s is served at x0.8
    assert fit_factors([slow, above], bounds)[0] == pytest.approx(1.2, rel=1e-4)  # the floor wins over the TPOT


def test_a_floor_residual_counts_only_a_shortfall() -> None:
    from infragen.sizing.calibration import Residual, median_abs_error

    over = Residual(source="r", metric="output_throughput_floor", phase="decode", measured=100.0, before=150.0,
                    after=90.0, at_least=True)
    assert over.error("before") == 0.0 and over.error("after") == pytest.approx(-0.1)
    assert median_abs_error([over], "before") == 0.0
    plain = over.model_copy(update={"at_least": False})
    assert plain.error("before") == pytest.approx(0.5)


NERDALERT = PUBLISHED / "nerdalert-h100-llama-3.1-8b-results.jsonl"
H100_8B = ["--model", str(PUBLISHED / "llama-3.1-8b-instruct-config.json"), "--precision", "bf16", "--gpu",
           "h100-sxm-80gb", "--gpus", "1"]


@pytest.mark.parametrize("line", [3, 4])  # 30 and 35 requests/s: served 27.9 and 28.5/s
def test_an_online_run_past_the_models_capacity_is_a_floor_of_it(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                  line: int) -> None:
    run = json.loads(NERDALERT.read_text().splitlines()[line])
    one = tmp_path / "run.json"
    one.write_text(json.dumps(run))
    profile = yaml.safe_load(_calibrate(tmp_path, [one], *H100_8B).read_text())
    err = capsys.readouterr().err
    assert "past its capacity" in err and "floor of the engine's capacity" in err
    [row] = profile["residuals"]  # the queue's latencies are not fitted
    assert row["metric"] == "output_throughput_floor" and row["at_least"] is True
    assert row["measured"] == pytest.approx(run["output_throughput"])
    assert row["before"] < row["measured"]  # the model's capacity (23.4/s) is below what the engine served
    assert row["after"] > row["before"]  # raised toward it: the floor is prompt-bound here (1,000 + 100 tokens)
    assert profile["decode_factor"] == 1.0 and profile["prefill_factor"] > 1.0
    # before, both factors ran to their bounds on latencies the model held infinite at every factor
    assert (profile["decode_factor"], profile["prefill_factor"]) != tuple(
        b[1] for b in (profile["decode_bounds"], profile["prefill_bounds"]))


def test_an_online_run_within_capacity_keeps_its_latencies(tmp_path: Path) -> None:
    one = tmp_path / "run.json"
    one.write_text(NERDALERT.read_text().splitlines()[1])  # 10 requests/s: the model holds 23.4/s
    profile = yaml.safe_load(_calibrate(tmp_path, [one], *H100_8B).read_text())
    assert {r["metric"] for r in profile["residuals"]} == {"median_tpot_ms", "median_ttft_ms"}
    assert not any(r["at_least"] for r in profile["residuals"])


@pytest.mark.parametrize("line, key, value, needle", [
    (5, "mean_e2el_ms", "Infinity", "mean_e2el_ms: expected a finite number >= 0"),  # json reads it as inf
    (1, "total_input_tokens", "1" + "0" * 400, "total_input_tokens: expected a finite number >= 0"),
    (1, "completed", "NaN", "completed: expected a finite number >= 0"),
    (3, "output_throughput", "0", "output_throughput: 0: the run served nothing"),  # past capacity: the floor
    (5, "output_throughput", "0", "output_throughput: 0: the run served nothing"),  # a burst
])
def test_a_vllm_result_with_an_impossible_number_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         line: int, key: str, value: str, needle: str) -> None:
    # found by fuzzing the result files: these ended in OverflowError / ZeroDivisionError (exit 70)
    doc = json.loads(NERDALERT.read_text().splitlines()[line])
    doc[key] = "@@"
    bad = tmp_path / "r.json"
    bad.write_text(json.dumps(doc).replace('"@@"', value))
    with pytest.raises(SystemExit) as exc:
        main(["calibrate", str(bad), *H100_8B])
    assert exc.value.code == 2
    assert needle in capsys.readouterr().err


@pytest.mark.parametrize("key, value", [("n_gen", 10**9), ("n_prompt", 2**63)])
def test_a_llama_bench_test_longer_than_the_model_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          key: str, value: int) -> None:
    record = json.loads((BENCH / "llama-bench-llama3.1-8b-f16-2026-12-05.json").read_text())
    row = next(r for r in record["results"] if r[key] > 0)
    row[key] = value
    bad = tmp_path / "lb.json"
    bad.write_text(json.dumps(record["results"]))
    with pytest.raises(SystemExit) as exc:
        main(["calibrate", str(bad), "--model", str(BENCH / "llama-3.1-8b-config.json"), "--hardware",
              str(BENCH / record["hardware_file"])])
    assert exc.value.code == 2  # was a ZeroDivisionError (exit 70): the estimate did not fit
    err = capsys.readouterr().err
    assert "lb.json: [" in err and "tokens" in err and "Traceback" not in err


def test_a_fit_worse_than_no_calibration_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a result that contradicts itself (1,000-token prompts, 2 generated tokens each, 96 ms between tokens): each
    # figure alone asks for a factor, together they put the run past capacity; nothing may be written
    doc = json.loads(NERDALERT.read_text().splitlines()[3])
    doc["total_output_tokens"] = 1e-300
    bad = tmp_path / "r.json"
    bad.write_text(json.dumps(doc))
    out = tmp_path / "profile.yaml"
    with pytest.raises(SystemExit) as exc:
        main(["calibrate", str(bad), *H100_8B, "-o", str(out)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "worse than the uncalibrated model" in err and "no profile written" in err
    assert "to infinite (past capacity)" in err
    assert not out.exists()


def test_a_bursts_ttft_is_queueing_not_a_serving_path(tmp_path: Path) -> None:
    # the llm-d file's three bursts (rate inf, no per-request lengths) waited 0.9 - 4.1 s for their first tokens;
    # read as TTFTs of a steady state they made the serving path 3,996 ms and both factors their bounds, with the
    # whole file's median error 70.8 % -> 84.1 % (before 2026-12-06)
    profile = yaml.safe_load(_calibrate(tmp_path, [ONLINE], *L40S).read_text())
    bursts = [r for r in profile["residuals"] if "/s per engine" not in r["source"]]
    assert bursts and {r["metric"] for r in bursts} == {"output_throughput", "median_tpot_ms"}
    assert profile["serving_overhead_ms"] is None or profile["serving_overhead_ms"] < 100
    assert profile["prefill_factor"] < profile["prefill_bounds"][1]


@pytest.mark.parametrize("field, value, needle", [
    ("decode_factor", 19.9, "decode_factor: 19.9 lies outside decode_bounds"),
    ("prefill_factor", 1e-300, "prefill_factor: 1e-300 lies outside prefill_bounds"),
    ("decode_bounds", [0.01, 30], "decode_bounds: [0.01, 30] is not a range within [0.2, 20]"),
])
def test_a_hand_edited_factor_outside_its_bounds_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         field: str, value: object, needle: str) -> None:
    out = _calibrate(tmp_path, [FIXTURES / "vllm-bench-serve-format.json"], "--model", "llama-3.1-8b",
                     "--precision", "bf16", "--gpu", "h100-sxm", "--gpus", "1")
    profile = yaml.safe_load(out.read_text())
    profile[field] = value
    out.write_text(yaml.safe_dump(profile))
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(["estimate", "--model", "llama-3.1-8b", "--precision", "bf16", "--gpu", "h100-sxm", "--gpus", "1",
              "--input-len", "100", "--output-len", "100", "--concurrency", "1", "--calibration", str(out)])
    assert exc.value.code == 2  # was accepted: x19.9 made TPOT 0.37 ms, x1e-300 the capacity 0 requests/s
    assert needle in capsys.readouterr().err


def test_a_profile_records_its_weight_types_and_notes_another(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    # the Intel runs: one type's factor moved another's predictions (calibrate-on-one 5.6 % -> 11.8 % there)
    run = BENCH / "llama-bench-tinyllama-f16-2026-12-06xb.json"
    hw = str(BENCH / "machine-2026-12-06xb.yaml")
    out = _calibrate(tmp_path, [run], "--model", str(BENCH / "tinyllama-1.1b-config.json"), "--hardware", hw)
    assert yaml.safe_load(out.read_text())["weight_types"] == ["fp16"]
    est = ["estimate", "--model", str(BENCH / "tinyllama-1.1b-config.json"), "--engine", "llama.cpp", "--hardware", hw,
           "--input-len", "100", "--output-len", "50", "--concurrency", "1", "--calibration", str(out)]
    capsys.readouterr()
    main([*est, "--precision", "fp16"])
    assert "note:" not in capsys.readouterr().err
    main([*est, "--precision", "q4_0"])
    err = capsys.readouterr().err
    assert "measured with fp16 weights and this runs q4_0" in err and "calibrate with a result of q4_0" in err


def test_a_vllm_profile_records_the_precision_it_was_given(tmp_path: Path) -> None:
    out = _calibrate(tmp_path, [FIXTURES / "vllm-bench-serve-format.json"], "--model", "llama-3.1-8b",
                     "--precision", "bf16", "--gpu", "h100-sxm", "--gpus", "1")
    assert yaml.safe_load(out.read_text())["weight_types"] == ["bf16"]


def test_a_profile_holds_for_models_of_its_shapes_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # calibrate_check: on the same hardware a factor learnt on one model moved other models' figures away from
    # their measurements (vLLM within 10 %: 510 -> 437 of 1,267) and the same model's towards them (205 -> 224)
    out = _calibrate(tmp_path, [FIXTURES / "vllm-bench-serve-format.json"], "--model", "llama-3.1-8b",
                     "--precision", "bf16", "--gpu", "h100-sxm", "--gpus", "1")
    doc = yaml.safe_load(out.read_text())
    assert doc["model"] == "llama-3.1-8b" and len(doc["model_shape"]) == 16
    est = ["estimate", "--precision", "bf16", "--gpu", "h100-sxm", "--gpus", "1", "--input-len", "100",
           "--output-len", "100", "--concurrency", "1", "--calibration", str(out)]
    capsys.readouterr()
    # the same shapes under another name (a config.json of the model) take it
    main([*est, "--model", str(BENCH / "llama-3.1-8b-config.json")])
    assert "applied: generation x" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main([*est, "--model", "qwen2.5-7b"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"{out}: model: it was measured with llama-3.1-8b, this estimate runs qwen2.5-7b" in err
    assert "Traceback" not in err
    # a profile written before it recorded its model holds for any model, as it did
    del doc["model_shape"], doc["model"]
    old = tmp_path / "old.yaml"
    old.write_text(yaml.safe_dump(doc))
    main([*est[:-1], str(old), "--model", "qwen2.5-7b"])
    assert "applied: generation x" in capsys.readouterr().err


@pytest.mark.parametrize("shape", ["0" * 15, "ABCDEF0123456789", "x" * 16])
def test_a_malformed_model_shape_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], shape: str) -> None:
    out = _calibrate(tmp_path, [FIXTURES / "vllm-bench-serve-format.json"], "--model", "llama-3.1-8b",
                     "--precision", "bf16", "--gpu", "h100-sxm", "--gpus", "1")
    doc = yaml.safe_load(out.read_text())
    out.write_text(yaml.safe_dump({**doc, "model_shape": shape}))
    with pytest.raises(SystemExit) as exc:
        main(["estimate", "--model", "llama-3.1-8b", "--precision", "bf16", "--gpu", "h100-sxm", "--gpus", "1",
              "--input-len", "100", "--output-len", "100", "--concurrency", "1", "--calibration", str(out)])
    assert exc.value.code == 2 and "model_shape" in capsys.readouterr().err


def test_a_vllm_profile_holds_for_engines_of_its_gpu_and_tp_on_any_machine(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # one H100 measured: eight tp-1 engines on an 8-GPU machine are that engine; one tp-8 engine is not
    out = _calibrate(tmp_path, [FIXTURES / "vllm-bench-serve-format.json"], "--model", "llama-3.1-8b",
                     "--precision", "bf16", "--gpu", "h100-sxm", "--gpus", "1")
    assert yaml.safe_load(out.read_text())["tp"] == 1
    est = ["estimate", "--model", "llama-3.1-8b", "--precision", "bf16", "--input-len", "100", "--output-len", "100",
           "--concurrency", "1", "--calibration", str(out)]
    capsys.readouterr()
    main([*est, "--gpu", "h100-sxm", "--gpus", "8", "--tp", "1"])
    assert "applied: generation x" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main([*est, "--gpu", "h100-sxm", "--gpus", "8"])  # tp 8 by default
    assert exc.value.code == 2
    assert "measured with engines of tp 1 on h100-sxm-80gb, this estimate runs tp 8" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main([*est, "--gpu", "a100-80gb", "--gpus", "8", "--tp", "1"])
    assert exc.value.code == 2 and "measured on 1 x h100-sxm-80gb engines (tp 1)" in capsys.readouterr().err
    # measured as eight tp-1 engines of an 8-GPU machine: the same profile, not one for tp 8 there
    eight = _calibrate(tmp_path, [FIXTURES / "vllm-bench-serve-format.json"], "--model", "llama-3.1-8b",
                       "--precision", "bf16", "--gpu", "h100-sxm", "--gpus", "8", "--tp", "1", "--replicas", "8")
    assert yaml.safe_load(eight.read_text())["tp"] == 1
    with pytest.raises(SystemExit) as exc:
        main([*est[:-1], str(eight), "--gpu", "h100-sxm", "--gpus", "8"])
    assert exc.value.code == 2  # was applied: the tp-1 factors on a tp-8 engine
    capsys.readouterr()
    main([*est[:-1], str(eight), "--gpu", "h100-sxm", "--gpus", "1"])
    assert "applied: generation x" in capsys.readouterr().err


@pytest.mark.parametrize("edit, needle", [
    ({"tp": 2}, "tp: 2 is more GPUs than the profile's gpus (1 x h100-sxm-80gb)"),
    ({"tp": 16, "gpus": "8 x h100-sxm-80gb"}, "tp: 16 is more GPUs than the profile's gpus (8 x h100-sxm-80gb)"),
    ({"engine": "llama.cpp", "gpus": None}, "tp: a llama.cpp profile has no tensor-parallel size"),
])
def test_a_tp_its_gpus_cannot_hold_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           edit: dict[str, object], needle: str) -> None:
    # a hand edit: engines of tp 2 measured on one GPU would calibrate every tp-2 engine of that GPU
    out = _calibrate(tmp_path, [FIXTURES / "vllm-bench-serve-format.json"], "--model", "llama-3.1-8b",
                     "--precision", "bf16", "--gpu", "h100-sxm", "--gpus", "1")
    out.write_text(yaml.safe_dump({**yaml.safe_load(out.read_text()), **edit}))
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(["estimate", "--model", "llama-3.1-8b", "--precision", "bf16", "--gpu", "h100-sxm", "--gpus", "2",
              "--input-len", "100", "--output-len", "100", "--concurrency", "1", "--calibration", str(out)])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and needle in err and "Traceback" not in err


def test_calibrate_refuses_a_tp_below_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # --tp 0 was read as "every GPU" (tp or gpu_count) and wrote a profile of tp 8, exit 0
    with pytest.raises(SystemExit) as exc:
        _calibrate(tmp_path, [FIXTURES / "vllm-bench-serve-format.json"], "--model", "llama-3.1-8b",
                   "--precision", "bf16", "--gpu", "h100-sxm", "--gpus", "8", "--tp", "0")
    assert exc.value.code == 2 and "--tp" in capsys.readouterr().err
