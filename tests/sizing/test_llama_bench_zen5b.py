"""The second Zen 5 llama-bench run (benchmarks/data/llama_bench/, tag 2026-12-05z5b): a later VM of the same kind
(AMD family 26 model 2), probed afresh, TinyLlama and Llama-3.2-3B shapes, never fitted. It is the check of the Zen 5
kernel set of cpu.weight_kernels (fitted on run 2026-12-05z5's TinyLlama rows) and the run the issue's target line
reads."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from benchmarks.llama_bench_check import CONFIGS, TARGET, bench_rows, fed, target_lines
from infragen.catalog import load_catalog
from infragen.catalog.hf_config import load_hf_config
from infragen.sizing.cpu_performance import weight_kernel
from infragen.sizing.estimate import llama_cpp_cpu_setup
from infragen.sizing.hardware import load_hardware_file
from tests.sizing.conftest import llama_bench_rate

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "llama_bench"
RUN = "2026-12-05z5b"
MACHINE = BENCH / f"machine-{RUN}.yaml"


@pytest.fixture(scope="module")
def rows():
    return [r for r in bench_rows() if r.run == RUN]


def test_the_probe_file_is_the_runs_first_probe_of_a_family_26_machine() -> None:
    doc = yaml.safe_load(MACHINE.read_text())
    assert doc["cpu"]["microarchitecture"] == "family 26 model 2" and doc["cpu"]["fp32_flops_per_cycle_per_core"] == 64
    spread = yaml.safe_load((BENCH / f"probes-{RUN}.yaml").read_text())
    reads = [p["read_gb_per_s"] for p in spread["probes"]]
    assert spread["probes"][0]["when"] == "machine-file" and reads[0] == doc["measured"]["memory_bandwidth_gb_per_s"]
    assert (spread["spread"]["min"], spread["spread"]["max"], spread["spread"]["n"]) == (
        min(reads), max(reads), len(reads))


def test_two_shapes_three_types_with_that_probe_none_fitted(rows) -> None:
    files = sorted(BENCH.glob(f"llama-bench-*-{RUN}.json"))
    assert len(files) == 6
    for path in files:
        record = json.loads(path.read_text())
        assert record["hardware_file"] == MACHINE.name and " -t 2 " in record["command"]
    assert sorted((r.shape, r.precision, r.test) for r in rows) == sorted(
        (s, p, t) for s in ("tinyllama", "llama3.2-3b") for p in ("fp16", "q8_0", "q4_0") for t in ("pp512", "tg128"))
    assert not any(fed(r) for r in rows)


def test_the_rows_are_predicted_with_the_zen5_kernel_set(rows) -> None:
    hw = load_hardware_file(MACHINE, load_catalog())
    setup = llama_cpp_cpu_setup(hw)
    for r in rows:
        model = load_hf_config(BENCH / CONFIGS[r.shape])
        assert r.predicted_tokens_per_s == pytest.approx(llama_bench_rate(model, hw, r.precision, r.test), rel=1e-12)
        kernel = weight_kernel(setup, r.precision)
        assert kernel is not None and kernel.generation_weights_per_cycle_per_core is not None
        assert kernel.generation_weights_per_cycle_per_core > 5  # Zen 5's floors, not the Zen 4 set's (3.8 - 9.9)
    zen4 = replace(setup, microarchitecture="family 25 model 17")  # the same features on a Zen 4: the other set
    assert weight_kernel(zen4, "q4_0") != weight_kernel(setup, "q4_0")


def test_the_target_line_reads_this_run(rows) -> None:
    """The newest never-fitted run on this machine kind: accuracy.py's verdict on the issue's llama.cpp target while
    this VM kind was this project's machine (2026-12-05)."""
    lines = target_lines([r for r in bench_rows() if r.machine == "family 26 model 2"])  # later runs: other VMs
    assert "(family 26 model 2)" in lines[0] and f"newest run '{RUN}'" in lines[0]
    tg = [r for r in rows if r.test.startswith("tg")]
    inside = sum(abs(r.error) <= TARGET for r in tg)
    assert lines[-1].strip().startswith(f"decode (tg) within +-20%: {inside} of {len(tg)}: target ")
    assert inside == len(tg) == 6, [(r.shape, r.precision, round(r.error, 3)) for r in tg]
