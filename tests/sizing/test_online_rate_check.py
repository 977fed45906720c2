"""benchmarks/online_rate_check.py: published runs at a request rate, predicted as `estimate --rate` predicts them."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml

from benchmarks import online_rate_check as orc
from infragen.cli import main

DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "vllm_results"


def test_every_finite_rate_run_of_the_published_file_is_a_row() -> None:
    runs = [r for r in orc.online_runs() if r.file == "llm-d-4xl40s-llama-3.2-3b-results.jsonl"]
    lines = [json.loads(x) for x in (DATA / "llm-d-4xl40s-llama-3.2-3b-results.jsonl").read_text().splitlines()]
    finite = [r for r in lines if r["request_rate"] != "inf"]
    assert len(runs) == len(finite) == 6
    assert sorted({r.rate_per_engine for r in runs}) == [2.5, 7.5]  # 10 and 30 requests/s over four engines
    assert {r.gpus for r in runs} == {"1 x l40s"}


def test_only_the_selected_engine_of_a_shared_file_is_read() -> None:
    # nerdalert's file holds vLLM's runs and SGLang's (metadata framework=sgl): sources.yaml selects vLLM's
    name = "nerdalert-h100-llama-3.1-8b-results.jsonl"
    lines = [json.loads(x) for x in (DATA / name).read_text().splitlines()]
    assert {r["framework"] for r in lines} == {"vllm", "sgl"}
    runs = [r for r in orc.online_runs() if r.file == name]
    vllm_finite = [r for r in lines if r["framework"] == "vllm" and r["request_rate"] != "inf"]
    assert [r.measured["median_tpot_ms"] for r in runs] == [r["median_tpot_ms"] for r in vllm_finite]


def test_sources_name_repository_commit_and_path() -> None:
    for entry in yaml.safe_load((DATA / "sources.yaml").read_text())["files"]:
        assert "@" in entry["source"] and (DATA / entry["file"]).is_file()


def test_a_row_is_what_estimate_rate_says(capsys: pytest.CaptureFixture[str]) -> None:
    run = orc.online_runs()[0]
    main(["estimate", "--model", str(DATA / run.model_config), "--precision", run.precision, "--gpu", run.gpu,
          "--gpus", str(run.gpus_per_engine), "--input-len", str(run.input_len), "--output-len",
          str(run.output_len), "--rate", str(run.rate_per_engine), "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    point = run.point()
    assert point["median_tpot_ms"] == pytest.approx(doc["latency"]["tpot_ms"], abs=0.01)
    assert point["median_ttft_ms"] == pytest.approx(doc["load"]["ttft_ms"]["p50"], abs=0.01)
    assert point["p99_ttft_ms"] == pytest.approx(doc["load"]["ttft_ms"]["p99"], abs=0.01)


def test_past_saturation_is_reported_not_hidden() -> None:
    text = "\n".join(orc.report())
    saturated = [r for r in orc.online_runs() if math.isinf(r.point()["median_tpot_ms"])]
    if saturated:
        assert f"{len(saturated)} of {len(orc.online_runs())} runs predicted past saturation" in text
        assert all(f"{r.label} ({r.throughput_share:.2f}: served " in text for r in saturated)
        assert all(f"model capacity {r.capacity_per_s():.2f}/s" in text for r in saturated)
        # calibrate's reading of them: a floor of the capacity each, not latencies
        floors = [f for f in orc.figures(orc.online_runs()) if f.at_least]
        assert len(floors) == len(saturated) and f"{len(floors)} of the " in text
    assert "calibrate on one online run" in text and "; target " in text
