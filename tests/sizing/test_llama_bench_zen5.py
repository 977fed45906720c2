"""The Zen 5 llama-bench run of 2026-12-05 (benchmarks/data/llama_bench/, tag 2026-12-05z5): the first run on an
AMD family 26 VM, the machine kind issue #18 measured on. Its rows are predicted with that VM's probe; its six
TinyLlama rows are what the Zen 5 kernel set of cpu.weight_kernels is fitted on, its 3B and 8B rows stay independent
checks; the probe spread file holds the probe the rows are predicted with."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from benchmarks.llama_bench_check import CONFIGS, bench_rows, fed
from infragen.catalog import load_catalog
from infragen.catalog.hf_config import load_hf_config
from infragen.sizing.hardware import load_hardware_file
from tests.sizing.conftest import llama_bench_rate

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "llama_bench"
RUN = "2026-12-05z5"
MACHINE = BENCH / f"machine-{RUN}.yaml"


@pytest.fixture(scope="module")
def rows():
    return [r for r in bench_rows() if r.run == RUN]


def test_the_zen5_probe_file_is_a_family_26_avx512_machine_at_64_flops_per_cycle() -> None:
    doc = yaml.safe_load(MACHINE.read_text())
    cpu = doc["cpu"]
    assert cpu["microarchitecture"] == "family 26 model 2" and "avx512" in cpu["simd"]
    assert cpu["fp32_flops_per_cycle_per_core"] == 64 and "Zen 5" in cpu["source"]
    spread = yaml.safe_load((BENCH / f"probes-{RUN}.yaml").read_text())
    reads = [p["read_gb_per_s"] for p in spread["probes"]]
    assert reads[0] == doc["measured"]["memory_bandwidth_gb_per_s"]  # the first probe is the file
    assert (spread["spread"]["min"], spread["spread"]["max"], spread["spread"]["n"]) == (
        min(reads), max(reads), len(reads))


def test_every_shape_and_type_was_run_with_that_probe_and_only_tinyllama_is_fitted(rows) -> None:
    files = sorted(BENCH.glob(f"llama-bench-*-{RUN}.json"))
    assert len(files) == 9
    for path in files:
        record = json.loads(path.read_text())
        assert record["hardware_file"] == MACHINE.name and " -t 2 " in record["command"]
        assert len(record["load_average_before_after"]) == 2
    assert sorted({(r.shape, r.precision) for r in rows}) == sorted(
        (s, p) for s in CONFIGS for p in ("fp16", "q8_0", "q4_0"))
    assert sorted(r.test for r in rows) == ["pp512"] * 9 + ["tg128"] * 9
    assert {r.shape for r in rows if fed(r)} == {"tinyllama"}
    assert {fed(r) for r in rows} == {None, "cpu.weight_kernels (x86_64 AVX-512 without AMX, Zen 5)"}
    assert {r.machine for r in rows} == {"family 26 model 2"}


def test_the_rows_are_predicted_as_estimate_predicts_them(rows) -> None:
    hw = load_hardware_file(MACHINE, load_catalog())
    for r in rows:
        model = load_hf_config(BENCH / CONFIGS[r.shape])
        expected = llama_bench_rate(model, hw, r.precision, r.test)
        assert r.predicted_tokens_per_s == pytest.approx(expected, rel=1e-12)
