"""llama.cpp check on probed machines: `estimate --hardware <its probe>` against llama-bench run on that machine.

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
#: its tg rate is the plainest read of what generation gets of the probed bandwidth.
FIT_PRECISIONS = ("fp16",)
#: The weight type whose AVX2 kernel rates (performance.yaml cpu.avx2_weight_kernels) are fitted on its tg and pp rows.
KERNEL_FIT_PRECISIONS = ("q8_0",)
#: The run the fits use (the first, 2026-12-03); later runs (files with a tag) and the other rows of the first
#: stay independent checks.
FIT_RUN = ""
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
    run: str = ""
    """The file's tag ('' for the first run, else the suffix after the type, e.g. '2026-12-04')."""
    date: str = ""

    @property
    def error(self) -> float:
        return self.predicted_tokens_per_s / self.measured_tokens_per_s - 1.0


def bench_rows(data: Path = DATA) -> list[BenchRow]:
    """Every llama-bench result stored in `data`, predicted with estimate() on the probed hardware file."""
    if not (data / "machine.yaml").is_file():
        return []
    model = load_hf_config(data / "tinyllama-1.1b-config.json")
    rows: list[BenchRow] = []
    for path in sorted(data.glob("llama-bench-*.json")):
        record = json.loads(path.read_text())
        kind = path.stem.split("-")[3]  # llama-bench-tinyllama-<type>[-<tag>]
        tag = path.stem.split(f"-{kind}", 1)[1].lstrip("-")
        # each run is predicted on the probe of the machine it ran on (the VM behind this project changes)
        hw = load_hardware_file(data / record.get("hardware_file", "machine.yaml"), load_catalog())
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
                                 gguf_weight_bytes(model, precision), r["n_threads"], tag, record.get("date", "")))
    return rows


def report(rows: list[BenchRow]) -> list[str]:
    """Lines for accuracy.py: each result, and the median error per test."""
    if not rows:
        return ["\nllama.cpp on this machine: no llama-bench records in benchmarks/data/llama_bench/"]
    lines = ["\nllama.cpp check on the probed machines (benchmarks/data/llama_bench/, `estimate --hardware` with each "
             "run's probe (2026-12-03: machine.yaml, AVX2; 2026-12-04: machine-2026-12-04.yaml, AVX-512) vs "
             "llama-bench -o json; TinyLlama-1.1B shapes):"]
    for r in rows:
        role = "fitted" if fitted(r) or kernel_fitted(r) else "independent"
        lines.append(f"  {r.date[:10]:<10} {r.precision:<5} {r.test:<6} {role:<11} measured best "
                     f"{r.measured_tokens_per_s:7.1f} (mean "
                     f"{r.mean_tokens_per_s:6.1f} +- {r.stddev_tokens_per_s:4.1f}) t/s  predicted "
                     f"{r.predicted_tokens_per_s:7.1f} ({r.error:+.0%})"
                     f"  file {r.file_bytes / 1e9:.3f} GB, model {r.predicted_file_bytes / 1e9:.3f} GB")
    for test in sorted({r.test for r in rows}):
        errs = [r.error for r in rows if r.test == test and not fitted(r) and not kernel_fitted(r)]
        if not errs:
            continue
        inside = sum(abs(e) <= TARGET for e in errs)
        lines.append(f"  {test} independent: n={len(errs)} median|err| {statistics.median(abs(e) for e in errs):.1%}, "
                     f"worst {max(errs, key=abs):+.1%}; within +-{TARGET:.0%} (the issue's target): {inside} of "
                     f"{len(errs)}")
    return lines


def fitted(row: BenchRow) -> bool:
    """Whether `row` fed cpu.measured_bandwidth_fraction."""
    return row.run == FIT_RUN and row.test.startswith("tg") and row.precision in FIT_PRECISIONS


def kernel_fitted(row: BenchRow) -> bool:
    """Whether `row` fed cpu.avx2_weight_kernels."""
    return row.run == FIT_RUN and row.precision in KERNEL_FIT_PRECISIONS


def fit_kernel(rows: list[BenchRow], clock_ghz: float, active_params: float,
               current: dict[str, float]) -> dict[str, float]:
    """avx2_weight_kernels figures of the fitted type from its rows of the fit run.

    generation_weights_per_cycle_per_core: the tg rate as a compute floor (active weights x tokens/s over threads
    x clock: the probed machine's bandwidth would allow more); prompt_flops_factor: the pp rate over what the
    model predicts for it without the factor (`current` is the factor the rows were predicted with).
    """
    tg = next(r for r in rows if kernel_fitted(r) and r.test.startswith("tg"))
    pp = next(r for r in rows if kernel_fitted(r) and r.test.startswith("pp"))
    return {"generation_weights_per_cycle_per_core": active_params * tg.measured_tokens_per_s
            / (tg.threads * clock_ghz * 1e9),
            "prompt_flops_factor": current["prompt_flops_factor"] * pp.measured_tokens_per_s
            / pp.predicted_tokens_per_s}


def fit_measured_fraction(rows: list[BenchRow], current: float) -> float:
    """Fraction of the measured bandwidth that makes the median log error of the fitted tg rows zero."""
    logs = [math.log(r.measured_tokens_per_s / r.predicted_tokens_per_s) for r in rows if fitted(r)]
    return current * math.exp(statistics.median(logs))
