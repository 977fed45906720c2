"""benchmarks/data/vllm_results/: the published `vllm bench serve` files, their sources, and the readers of
online_rate_check.py (printed result blocks, which bound each run) and closed_loop_check.py (estimate() at the
run's concurrency)."""

from __future__ import annotations

import hashlib
import math
import re
from pathlib import Path

import pytest
import yaml

from benchmarks import closed_loop_check as clc
from benchmarks import online_rate_check as orc
from infragen.catalog import load_catalog
from infragen.catalog.hf_config import load_hf_config
from infragen.sizing.constants import OVERRIDE, load_constants
from infragen.sizing.estimate import estimate
from infragen.sizing.hardware import hardware_from_gpu

DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "vllm_results"
ENTRIES = yaml.safe_load((DATA / "sources.yaml").read_text())["files"]
C64 = "runpod-h100-qwen3-8b-c64-25rps.log"


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["file"] for e in ENTRIES])
def test_every_file_is_a_byte_copy_of_its_stated_source(entry: dict[str, object]) -> None:
    path = DATA / str(entry["file"])
    assert re.match(r"^github\.com/[\w.-]+/[\w.-]+@[0-9a-f]{40} \S", str(entry["source"]))  # repo@commit path
    assert hashlib.sha256(path.read_bytes()).hexdigest() == entry["sha256"]
    assert path.stat().st_size < 1_000_000
    assert load_catalog().accelerator(str(entry["gpu"])) is not None
    assert load_hf_config(DATA / str(entry["model_config"])).num_layers > 0
    assert orc.documents(entry)  # parses, and holds at least one run


def test_every_result_file_here_has_a_sources_entry() -> None:
    listed = {e["file"] for e in ENTRIES} | {e["model_config"] for e in ENTRIES} | {"README.md", "sources.yaml"}
    assert {p.name for p in DATA.iterdir()} == listed


def test_a_printed_result_block_reads_as_save_result_keys() -> None:
    entry = next(e for e in ENTRIES if e["file"] == C64)
    doc = orc.documents(entry)[0]
    # the figures printed in the log (Serving Benchmark Result of max_concurrency 64 at 25 requests/s)
    assert doc["completed"] == 1024 and doc["max_concurrency"] == 64 and doc["request_rate"] == 25.0
    assert doc["total_input_tokens"] == 524288 and doc["total_output_tokens"] == 262144
    assert doc["request_throughput"] == 20.42 and doc["output_throughput"] == 5226.31
    assert doc["median_ttft_ms"] == 44.54 and doc["p99_ttft_ms"] == 150.57 and doc["mean_itl_ms"] == 11.49
    # no TPOT printed; every output 256 tokens: mean TPOT = (mean E2EL - mean TTFT) / 255
    assert doc["mean_tpot_ms"] == pytest.approx((2996.44 - 54.59) / 255)
    assert "median_tpot_ms" not in doc


def test_a_log_without_one_result_block_is_refused() -> None:
    with pytest.raises(ValueError, match="one 'Serving Benchmark Result' block"):
        orc.parse_printed("Starting main benchmark run...\n")


def test_tpot_is_not_derived_when_output_lengths_differ() -> None:
    entry = {**next(e for e in ENTRIES if e["file"] == C64), "output_len": 200}  # 1024 x 256 generated, not 200
    assert "mean_tpot_ms" not in orc.documents(entry)[0]


@pytest.mark.parametrize(("doc", "expected"), [
    ({"request_rate": 10.0, "max_concurrency": None}, "online"),
    ({"request_rate": "inf", "max_concurrency": None}, "burst"),
    ({"request_rate": float("inf"), "max_concurrency": 64, "request_throughput": 10.0, "mean_e2el_ms": 6200.0},
     "closed"),  # 62 in flight of 64
    ({"request_rate": 25.0, "max_concurrency": 256, "request_throughput": 10.0, "mean_e2el_ms": 2000.0},
     "online"),  # 20 in flight: the cap never bound
    ({"request_rate": 25.0, "max_concurrency": 96, "request_throughput": 23.6, "mean_e2el_ms": 3470.0},
     "mixed"),  # 82 of 96: the rate and the cap both bound
])
def test_a_run_is_classed_by_what_bound_it(doc: dict[str, object], expected: str) -> None:
    assert orc.regime({"completed": 100, "total_output_tokens": 100, **doc}) == expected


def test_the_h100_sweeps_split_into_closed_and_online_runs() -> None:
    closed = {r.file for r in clc.closed_runs()}
    online = {r.file for r in orc.online_runs()}
    assert {f"runpod-h100-qwen3-8b-c{c}-25rps.log" for c in (4, 8, 16, 32, 64)} <= closed
    assert {f"runpod-h100-qwen3-8b-{r}rps-c256.log" for r in (80, 300)} <= closed
    assert {f"runpod-h100-qwen3-8b-{r}rps-c256.log" for r in (5, 10, 15, 20, 25)} <= online
    assert not closed & online


def test_closed_loop_predictions_are_estimates_at_the_run_concurrency() -> None:
    runs = clc.closed_runs()
    assert runs
    for run in runs:
        hw = hardware_from_gpu(load_catalog().accelerator(run.gpu), run.gpus_per_engine)
        est = estimate(load_hf_config(DATA / run.model_config), hw, precision=run.precision, engine="vllm",
                       tp=run.gpus_per_engine, input_len=run.input_len, output_len=run.output_len,
                       concurrency=run.concurrency)
        pred = run.predicted()
        assert pred["mean_tpot_ms"] == est.tpot_ms and pred["output_throughput"] == est.output_tokens_per_s
        assert pred["median_ttft_ms"] == (est.ttft_ms if run.concurrency <= est.max_concurrency else math.inf)


def test_a_closed_run_uses_its_own_concurrency_and_mean_lengths() -> None:
    run = next(r for r in clc.closed_runs() if r.file == C64)
    assert (run.concurrency, run.input_len, run.output_len) == (64, 512, 256)
    assert run.measured == {"mean_tpot_ms": pytest.approx((2996.44 - 54.59) / 255), "median_ttft_ms": 44.54,
                            "output_throughput": 5226.31}


def test_the_closed_loop_report_groups_runs_by_gpu() -> None:
    text = "\n".join(clc.report())
    assert "closed-loop rows" in text and "  vllm on 1 x h100-sxm-80gb:" in text
    for run in clc.closed_runs():
        assert run.label in text


def test_the_kv_read_override_is_in_process_and_undone() -> None:
    run = next(r for r in clc.closed_runs() if r.concurrency == 256)
    before = run.predicted()["mean_tpot_ms"]
    fitted = load_constants().engines["vllm"].kv_bandwidth_fraction
    with clc.kv_bandwidth_fraction(0.8):
        assert load_constants().engines["vllm"].kv_bandwidth_fraction == 0.8
        assert run.predicted()["mean_tpot_ms"] < before  # a faster KV read: a shorter step at 256 sequences
    assert not OVERRIDE and load_constants().engines["vllm"].kv_bandwidth_fraction == fitted
    assert run.predicted()["mean_tpot_ms"] == before


def test_the_kv_sweep_has_a_column_per_fraction_and_a_row_per_run() -> None:
    table = clc.kv_sweep([0.4083, 0.8])
    assert table[0].endswith("| 0.4083 | 0.8 |")
    assert len(table) == 2 + len(clc.closed_runs()) + len(orc.online_runs())
