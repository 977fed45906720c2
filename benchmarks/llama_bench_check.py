"""llama.cpp check on a probed machine: `estimate --hardware machine.yaml` against llama-bench run on that machine.

Reads benchmarks/data/llama_bench/ (llama-bench -o json records written by llama_bench_cpu.py, the probed
hardware file and the model's config.json); used by accuracy.py. Not fitted unless `fit_measured_fraction` is run.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

from infragen.catalog import load_catalog
from infragen.catalog.hf_config import load_hf_config
from infragen.sizing.estimate import estimate
from infragen.sizing.hardware import load_hardware_file
from infragen.sizing.memory import gguf_weight_bytes

DATA = Path(__file__).resolve().parent / "data" / "llama_bench"
#: llama-bench's model type suffix -> infragen's GGUF precision name.
PRECISION = {"F16": "fp16", "Q8_0": "q8_0", "Q4_0": "q4_0"}
#: Generation rows `cpu.measured_bandwidth_fraction` is fitted on: F16 streams its weights with no dequantization, so
#: its tg rate is the plainest read of what generation gets of the probed bandwidth. Q8_0/Q4_0 and every pp row stay
#: independent checks.
FIT_PRECISIONS = ("fp16",)
#: The issue's target for llama.cpp decode on this machine.
TARGET = 0.20


@dataclass(frozen=True)
class BenchRow:
    """One llama-bench result against the model."""

    precision: str
    test: str
    """pp512 or tg128."""
    measured_tokens_per_s: float
    """Best repetition (samples_ts): on a machine shared with other jobs the least disturbed one, as the
    probe's best-of-N bandwidth."""
    mean_tokens_per_s: float
    stddev_tokens_per_s: float
    predicted_tokens_per_s: float
    file_bytes: int
    predicted_file_bytes: float
    threads: int

    @property
    def error(self) -> float:
        return self.predicted_tokens_per_s / self.measured_tokens_per_s - 1.0


def bench_rows(data: Path = DATA) -> list[BenchRow]:
    """Every llama-bench result stored in `data`, predicted with estimate() on the probed hardware file."""
    if not (data / "machine.yaml").is_file():
        return []
    model = load_hf_config(data / "tinyllama-1.1b-config.json")
    hw = load_hardware_file(data / "machine.yaml", load_catalog())
    rows: list[BenchRow] = []
    for path in sorted(data.glob("llama-bench-*.json")):
        record = json.loads(path.read_text())
        for r in record["results"]:
            precision = PRECISION[r["model_type"].split()[-1]]
            if r["n_gen"] > 0:
                est = estimate(model, hw, precision=precision, engine="llama.cpp", input_len=1,
                               output_len=r["n_gen"], concurrency=1)
                predicted, test = 1e3 / est.tpot_ms, f"tg{r['n_gen']}"
            else:
                est = estimate(model, hw, precision=precision, engine="llama.cpp", input_len=r["n_prompt"],
                               output_len=1, concurrency=1)
                predicted, test = r["n_prompt"] / (est.ttft_ms / 1e3), f"pp{r['n_prompt']}"
            best = max(r.get("samples_ts") or [r["avg_ts"]])
            rows.append(BenchRow(precision, test, best, r["avg_ts"], r["stddev_ts"], predicted, r["model_size"],
                                 gguf_weight_bytes(model, precision), r["n_threads"]))
    return rows


def report(rows: list[BenchRow]) -> list[str]:
    """Lines for accuracy.py: each result, and the median error per test."""
    if not rows:
        return ["\nllama.cpp on this machine: no llama-bench records in benchmarks/data/llama_bench/"]
    lines = ["\nllama.cpp check on the probed machine (benchmarks/data/llama_bench/, `estimate --hardware "
             "machine.yaml` vs llama-bench -o json; TinyLlama-1.1B shapes):"]
    for r in rows:
        role = "fitted" if fitted(r) else "independent"
        lines.append(f"  {r.precision:<5} {r.test:<6} {role:<11} measured best {r.measured_tokens_per_s:7.1f} (mean "
                     f"{r.mean_tokens_per_s:6.1f} +- {r.stddev_tokens_per_s:4.1f}) t/s  predicted "
                     f"{r.predicted_tokens_per_s:7.1f} ({r.error:+.0%})"
                     f"  file {r.file_bytes / 1e9:.3f} GB, model {r.predicted_file_bytes / 1e9:.3f} GB")
    for test in sorted({r.test for r in rows}):
        errs = [r.error for r in rows if r.test == test and not fitted(r)]
        if not errs:
            continue
        inside = sum(abs(e) <= TARGET for e in errs)
        lines.append(f"  {test} independent: n={len(errs)} median|err| {statistics.median(abs(e) for e in errs):.1%}, "
                     f"worst {max(errs, key=abs):+.1%}; within +-{TARGET:.0%} (the issue's target): {inside} of "
                     f"{len(errs)}")
    return lines


def fitted(row: BenchRow) -> bool:
    """Whether `row` fed cpu.measured_bandwidth_fraction."""
    return row.test.startswith("tg") and row.precision in FIT_PRECISIONS


def fit_measured_fraction(rows: list[BenchRow], current: float) -> float:
    """Fraction of the measured bandwidth that makes the median log error of the fitted tg rows zero."""
    logs = [math.log(r.measured_tokens_per_s / r.predicted_tokens_per_s) for r in rows if fitted(r)]
    return current * math.exp(statistics.median(logs))
