"""The Llama-3.1-8B llama-bench run of 2026-12-05 (benchmarks/data/llama_bench/, llama_bench_cpu --shape llama3.1-8b
--tag 2026-12-05): its files are read by the check, never fitted, and predicted exactly as `estimate()` predicts
them; the check names the term that bounds each decode prediction and the share of the probe each decode streams."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.llama_bench_check import CONFIGS, bench_rows, fed, report
from benchmarks.llama_bench_cpu import SHAPES
from infragen.catalog import load_catalog
from infragen.catalog.hf_config import load_hf_config
from infragen.sizing import constants as constants_mod
from infragen.sizing.hardware import load_hardware_file
from tests.sizing.conftest import llama_bench_rate

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "llama_bench"
RUN = "2026-12-05"
SHAPE = "llama3.1-8b"
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "hf_configs" / "llama-3.1-8b-instruct.json"


@pytest.fixture(scope="module")
def rows():
    return [r for r in bench_rows() if r.run == RUN and r.shape == SHAPE]


def test_the_8b_shape_is_the_transcribed_llama_3_1_8b_config() -> None:
    """The benchmark's config.json carries the architecture keys of the Hugging Face config transcribed in the
    fixtures, and both scripts know the shape by the same file."""
    assert SHAPES[SHAPE][0] == CONFIGS[SHAPE] == "llama-3.1-8b-config.json"
    mine, source = json.loads((BENCH / CONFIGS[SHAPE]).read_text()), json.loads(FIXTURE.read_text())
    assert {k: source[k] for k in mine} == mine
    model = load_hf_config(BENCH / CONFIGS[SHAPE])
    assert (model.hidden_size, model.num_layers, model.num_attention_heads, model.num_kv_heads) == (
        4096, 32, 32, 8)


def test_the_8b_run_is_read_and_never_fitted(rows) -> None:
    files = sorted(BENCH.glob(f"llama-bench-{SHAPE}-*-{RUN}.json"))
    assert files, "no 2026-12-05 Llama-3.1-8B record"
    for path in files:
        record = json.loads(path.read_text())
        assert record["hardware_file"] == f"machine-{RUN}.yaml" and (BENCH / record["hardware_file"]).is_file()
        assert record["command"].startswith("llama-bench -m llama3.1-8b-") and " -t 2 " in record["command"]
        assert len(record["load_average_before_after"]) == 2 and record["model_config"] == CONFIGS[SHAPE]
    kinds = {p.stem.split("-")[-4] for p in files}
    assert {"q4_0", "q8_0"} <= kinds
    precision = {"f16": "fp16", "q8_0": "q8_0", "q4_0": "q4_0"}
    assert sorted((r.precision, r.test) for r in rows) == sorted(
        (precision[k], t) for k in kinds for t in ("pp512", "tg128"))
    assert not any(fed(r) for r in rows)
    for r in rows:  # the model's weight bytes are the file's (the Q4_0 file's output matrix is Q6_K)
        assert r.predicted_file_bytes == pytest.approx(r.file_bytes, rel=0.01), r.precision
    lines = report(bench_rows())
    mine = [ln for ln in lines if f" {RUN:<12} {SHAPE:<11} " in ln]  # this run's lines (the Zen 5 run has 8B rows too)
    assert len(mine) == len(rows) and all("independent" in ln for ln in mine)


def test_the_check_predicts_what_estimate_predicts(rows) -> None:
    """Each row's prediction is `estimate --hardware machine-2026-12-05.yaml` for one request: tg = 1 / TPOT of a
    1-token prompt, pp = the prompt's tokens / TTFT."""
    model = load_hf_config(BENCH / CONFIGS[SHAPE])
    hw = load_hardware_file(BENCH / f"machine-{RUN}.yaml", load_catalog())
    assert rows
    for r in rows:
        expected = llama_bench_rate(model, hw, r.precision, r.test)
        assert r.predicted_tokens_per_s == pytest.approx(expected, rel=1e-12)


def _with_fraction(fraction: float):
    c = constants_mod.load_constants()
    return c.model_copy(update={"cpu": c.cpu.model_copy(update={"measured_bandwidth_fraction": fraction})})


def test_the_bound_and_the_streamed_share_are_what_the_bandwidth_fraction_does() -> None:
    """A bandwidth-bound decode row moves with cpu.measured_bandwidth_fraction and a floor-bound one does not; at a
    fraction equal to a bandwidth-bound row's streamed share, the prediction is the measurement (when that share
    keeps the row bandwidth-bound). Checked on every stored decode row, with the constants overridden as a fit does."""
    base = [r for r in bench_rows() if r.bound]
    assert {r.bound for r in base} == {"bandwidth", "floor"}
    assert all(r.test.startswith("tg") for r in base)
    current = constants_mod.load_constants().cpu.measured_bandwidth_fraction
    constants_mod.OVERRIDE.append(_with_fraction(current * 1.05))
    try:
        faster = {(r.run, r.shape, r.precision): r.predicted_tokens_per_s for r in bench_rows() if r.bound}
    finally:
        constants_mod.OVERRIDE.pop()
    for r in base:
        moved = faster[(r.run, r.shape, r.precision)] / r.predicted_tokens_per_s
        if r.bound == "bandwidth":
            assert moved > 1.0 + 1e-6, (r.run, r.shape, r.precision)
        else:
            assert moved == pytest.approx(1.0, rel=1e-12), (r.run, r.shape, r.precision)
    slower = [r for r in base if r.bound == "bandwidth" and r.streamed_fraction < current]
    assert slower  # the first run's Q4_0 decode at least
    for r in slower:
        constants_mod.OVERRIDE.append(_with_fraction(r.streamed_fraction))
        try:
            again = next(x for x in bench_rows() if (x.run, x.shape, x.precision, x.test) ==
                         (r.run, r.shape, r.precision, r.test))
        finally:
            constants_mod.OVERRIDE.pop()
        assert again.predicted_tokens_per_s == pytest.approx(r.measured_tokens_per_s, rel=1e-9)
