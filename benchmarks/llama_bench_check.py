"""llama.cpp check on probed machines: `estimate --hardware <its probe>` against llama-bench run on that machine.

Reads benchmarks/data/llama_bench/ (llama-bench -o json records written by llama_bench_cpu.py, the probed
hardware file and the models' config.json); used by accuracy.py. Which rows fed which fitted figure: FITS (the
fit functions recompute them; tests check that the data holds their result); every other row is independent.
"""

from __future__ import annotations

import json
import math
import re
import statistics
from dataclasses import dataclass
from pathlib import Path

from infragen.catalog import load_catalog
from infragen.catalog.hf_config import load_hf_config
from infragen.sizing.cpu_performance import generation_step_s
from infragen.sizing.estimate import estimate, llama_cpp_cpu_setup
from infragen.sizing.hardware import load_hardware_file
from infragen.sizing.memory import gguf_weight_bytes, param_groups
from infragen.units import GIB

DATA = Path(__file__).resolve().parent / "data" / "llama_bench"
#: llama-bench's model type suffix -> infragen's GGUF precision name.
PRECISION = {"F16": "fp16", "Q8_0": "q8_0", "Q4_0": "q4_0"}
#: The model shapes' config.json by file prefix (llama-bench-<shape>-<type>[-<tag>].json).
CONFIGS = {"tinyllama": "tinyllama-1.1b-config.json", "llama3.2-3b": "llama-3.2-3b-config.json",
           "llama3.1-8b": "llama-3.1-8b-config.json"}
_FILE = re.compile(r"llama-bench-(?P<shape>.+?)-(?P<kind>f16|q8_0|q4_0)(?:-(?P<tag>.+))?")


@dataclass(frozen=True)
class Fit:
    """Rows one fitted figure of performance.yaml's cpu section was fitted on (every other row is independent)."""

    run: str
    """The files' tag ('' for the first run, 2026-12-03)."""
    shape: str
    precisions: tuple[str, ...]
    tests: tuple[str, ...]
    """Test name prefixes: tg, pp."""
    figure: str


#: cpu.measured_bandwidth_fraction: the first run's F16 tg (F16 streams its weights with no dequantization, so its
#: tg rate is the plainest read of what generation gets of the probed bandwidth). cpu.weight_kernels: the AVX2 set on
#: that run's Q8_0 rows, the AVX-512 set on the 2026-12-04 run's six rows (TinyLlama shapes, Zen 4), the Zen 5 set
#: (its F16 prompt factor on the quiet 2026-12-06z4 run's TinyLlama F16 pp512 since 2026-12-06: the 2026-12-04 run's,
#: under a load average of 1.4-2.5, read half the prompt rate that two quiet runs measured), the Zen 5 set
#: on the 2026-12-05z5 run's six TinyLlama rows, the AMX set (Intel family 6 model 207, AMX compiled out as infragen's
#: nodes build it) on the 2026-12-06x run's TinyLlama Q8_0 and Q4_0 rows (its F16 rows are read at the bandwidth and
#: set nothing). Later runs (other tags, other shapes) and the other rows of the first stay independent checks.
FITS = (
    Fit("", "tinyllama", ("fp16",), ("tg",), "cpu.measured_bandwidth_fraction"),
    Fit("", "tinyllama", ("q8_0",), ("tg", "pp"), "cpu.weight_kernels (x86_64 AVX2 without AVX-512)"),
    Fit("2026-12-04", "tinyllama", ("q8_0", "q4_0"), ("tg", "pp"), "cpu.weight_kernels (x86_64 AVX-512 without AMX)"),
    Fit("2026-12-04", "tinyllama", ("fp16",), ("tg",), "cpu.weight_kernels (x86_64 AVX-512 without AMX)"),
    Fit("2026-12-06z4", "tinyllama", ("fp16",), ("pp",), "cpu.weight_kernels (x86_64 AVX-512 without AMX)"),
    Fit("2026-12-05z5", "tinyllama", ("fp16", "q8_0", "q4_0"), ("tg", "pp"),
        "cpu.weight_kernels (x86_64 AVX-512 without AMX, Zen 5)"),
    Fit("2026-12-06x", "tinyllama", ("q8_0", "q4_0"), ("tg", "pp"),
        "cpu.weight_kernels (x86_64 AVX-512 with AMX compiled out)"),
)
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
    shape: str = "tinyllama"
    load: tuple[float, ...] = ()
    """1-minute load average before and after the file's runs (the machine is shared)."""
    clock_ghz: float = 0.0
    """The probed clock the row was predicted with."""
    active_params: float = 0.0
    machine: str = ""
    """The probed CPU's microarchitecture (the VM behind this project changes between sessions)."""
    bound: str = ""
    """tg rows: the term of the generation step that sets the prediction, 'bandwidth' (weights and KV read at
    cpu.measured_bandwidth_fraction of the probe) or 'floor' (the weight type's matrix-vector kernel rate,
    cpu.weight_kernels); '' for prompt rows."""
    streamed_fraction: float = 0.0
    """tg rows: the share of the probed read rate that the measured rate streams (the bytes the model reads a
    token x measured tokens/s / the probe). A lower bound on the fraction generation gets; for a bandwidth-bound row,
    the cpu.measured_bandwidth_fraction that would make the prediction equal the measurement."""

    @property
    def error(self) -> float:
        return self.predicted_tokens_per_s / self.measured_tokens_per_s - 1.0


def bench_rows(data: Path = DATA) -> list[BenchRow]:
    """Every llama-bench result stored in `data`, predicted with estimate() on the probed hardware file."""
    if not (data / "machine.yaml").is_file():
        return []
    rows: list[BenchRow] = []
    for path in sorted(data.glob("llama-bench-*.json")):
        m = _FILE.fullmatch(path.stem)
        if m is None:
            continue
        record = json.loads(path.read_text())
        shape, tag = m["shape"], m["tag"] or ""
        model = load_hf_config(data / CONFIGS[shape])
        active = float(param_groups(model).active())
        # each run is predicted on the probe of the machine it ran on (the VM behind this project changes)
        hw = load_hardware_file(data / record.get("hardware_file", "machine.yaml"), load_catalog())
        clock = float(hw.cpu.sustained_clock_ghz or 0.0) if hw.cpu else 0.0
        machine = str(hw.cpu.microarchitecture) if hw.cpu else ""
        for r in record["results"]:
            precision = PRECISION[r["model_type"].split()[-1]]
            bound, streamed = "", 0.0
            if r["n_gen"] > 0:
                est = estimate(model, hw, precision=precision, engine="llama.cpp", input_len=1,
                               output_len=r["n_gen"], concurrency=1)
                predicted, test = 1e3 / est.tpot_ms, f"tg{r['n_gen']}"
                # one slot: tpot is max(bytes / effective bandwidth, the kernel's compute); which one, and the
                # share of the probe the measured rate streams (estimate's bytes: weights + the mean KV read)
                setup = llama_cpp_cpu_setup(hw)
                compute_s = generation_step_s(setup, 0.0, active, 0.0, 1, precision)
                bound = "bandwidth" if est.tpot_ms / 1e3 > compute_s * (1 + 1e-9) else "floor"
                read = est.weights_gib_per_gpu * GIB + (1 + r["n_gen"] / 2) * est.kv_cache_bytes_per_token
                best_tg = max(r.get("samples_ts") or [r["avg_ts"]])
                streamed = read * best_tg / setup.bandwidth_bytes_per_s
            else:
                est = estimate(model, hw, precision=precision, engine="llama.cpp", input_len=r["n_prompt"],
                               output_len=1, concurrency=1)
                predicted, test = r["n_prompt"] / (est.ttft_ms / 1e3), f"pp{r['n_prompt']}"
            best = max(r.get("samples_ts") or [r["avg_ts"]])
            rows.append(BenchRow(precision, test, best, r["avg_ts"], r["stddev_ts"], predicted, r["model_size"],
                                 gguf_weight_bytes(model, precision), r["n_threads"], tag, record.get("date", ""),
                                 shape, tuple(record.get("load_average_before_after", ())), clock, active,
                                 machine, bound, streamed))
    return rows


def fed(row: BenchRow) -> str | None:
    """The figure `row` was fitted into, None for an independent row."""
    for f in FITS:
        if (row.run, row.shape) == (f.run, f.shape) and row.precision in f.precisions \
                and row.test.startswith(f.tests):
            return f.figure
    return None


def report(rows: list[BenchRow]) -> list[str]:
    """Lines for accuracy.py: each result, and the median error per test of the independent rows."""
    if not rows:
        return ["\nllama.cpp on this machine: no llama-bench records in benchmarks/data/llama_bench/"]
    lines = ["\nllama.cpp check on the probed machines (benchmarks/data/llama_bench/, `estimate --hardware` with each "
             "run's probe (2026-12-03: machine.yaml, Zen 3, AVX2; 2026-12-04/04b/05/06z4: machine-2026-12-04*.yaml, "
             "machine-2026-12-05.yaml and machine-2026-12-06z4.yaml, Zen 4, AVX-512; 2026-12-05z5/z5b: "
             "machine-2026-12-05z5*.yaml, Zen 5, AVX-512; 2026-12-06x/xb: machine-2026-12-06x*.yaml, Intel family 6 "
             "model 207, AVX-512 with AMX, "
             "built without AMX as infragen's nodes are) vs llama-bench -o json; load = 1-minute load average "
             "before/after the type's runs on the shared machine):"]
    for r in rows:
        role = "fitted" if fed(r) else "independent"
        load = "/".join(f"{x:.1f}" for x in r.load) or "?"
        lines.append(f"  {r.date[:10]:<10} {r.run or '-':<12} {r.shape:<11} {r.precision:<5} {r.test:<6} {role:<11} "
                     f"load {load:<8} measured best {r.measured_tokens_per_s:7.1f} (mean {r.mean_tokens_per_s:6.1f} +- "
                     f"{r.stddev_tokens_per_s:4.1f}) t/s  predicted {r.predicted_tokens_per_s:7.1f} ({r.error:+.0%})"
                     f"  file {r.file_bytes / 1e9:.3f} GB, model {r.predicted_file_bytes / 1e9:.3f} GB"
                     + (f"  {r.bound}-bound, streams {r.streamed_fraction:.3f} of the probe" if r.bound else ""))
    for test in sorted({r.test for r in rows}):
        errs = [r.error for r in rows if r.test == test and not fed(r)]
        if not errs:
            continue
        inside = sum(abs(e) <= TARGET for e in errs)
        lines.append(f"  {test} independent: n={len(errs)} median|err| {statistics.median(abs(e) for e in errs):.1%}, "
                     f"worst {max(errs, key=abs):+.1%}; within +-{TARGET:.0%} (the issue's target): {inside} of "
                     f"{len(errs)}")
    return lines


def target_lines(rows: list[BenchRow]) -> list[str]:
    """The issue's target on this machine (the CPU of the newest run): decode (tg) of the newest never-fitted run
    on it, with its probe, within +-20 %."""
    if not rows:
        return []
    machine = max(rows, key=lambda r: r.date).machine
    independent = [r for r in rows if not fed(r) and r.machine == machine]
    head = f"\nllama.cpp decode on this machine ({machine}) against the issue's target (within +-{TARGET:.0%} of " \
           "llama-bench, probed hardware file)"
    if not independent:
        return [head + ": no never-fitted run on it yet, target not checked"]
    newest = max(independent, key=lambda r: r.date).run
    mine = [r for r in independent if r.run == newest]
    tg = [r for r in mine if r.test.startswith("tg")]
    inside = sum(abs(r.error) <= TARGET for r in tg)
    load = sorted({x for r in mine for x in r.load})
    when = f"load average {load[0]:.1f}-{load[-1]:.1f}" if load else "load not recorded"
    lines = [f"{head}; newest run '{newest}', {mine[0].date[:10]}, never fitted, {when}:"]
    for r in sorted(mine, key=lambda r: (r.shape, r.test, r.precision)):
        mark = "" if not r.test.startswith("tg") else ("  within" if abs(r.error) <= TARGET else "  MISSED")
        lines.append(f"  {r.shape:<11} {r.precision:<5} {r.test:<6} measured {r.measured_tokens_per_s:7.1f} t/s "
                     f"predicted {r.predicted_tokens_per_s:7.1f} ({r.error:+.0%}){mark}")
    verdict = "met" if tg and inside == len(tg) else "not met"
    lines.append(f"  decode (tg) within +-{TARGET:.0%}: {inside} of {len(tg)}: target {verdict}")
    return lines


def fitted(row: BenchRow) -> bool:
    """Whether `row` fed cpu.measured_bandwidth_fraction."""
    return fed(row) == FITS[0].figure


def fit_kernels(rows: list[BenchRow], figure: str, current: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """A cpu.weight_kernels set's figures by type from the rows that fed `figure` (FITS: one run's, or a figure's
    tg from one run and pp from another).

    generation_weights_per_cycle_per_core: where the tg rate is below what the model predicts without it, the
    rate as a compute floor (active weights x tokens/s over threads x clock); prompt_flops_factor: the pp rate over
    the model's (`current`: the figures the rows were predicted with, by type).
    """
    out: dict[str, dict[str, float]] = {}
    for precision in sorted({p for f in FITS if f.figure == figure for p in f.precisions}):
        mine = [r for r in rows if fed(r) == figure and r.precision == precision]
        tg = next(r for r in mine if r.test.startswith("tg"))
        pp = next(r for r in mine if r.test.startswith("pp"))
        cur = current.get(precision, {})
        figures = {"prompt_flops_factor": cur.get("prompt_flops_factor", 1.0) * pp.measured_tokens_per_s
                   / pp.predicted_tokens_per_s}
        floor = tg.active_params * tg.measured_tokens_per_s / (tg.threads * tg.clock_ghz * 1e9)
        if cur.get("generation_weights_per_cycle_per_core") or tg.error > 0:
            figures["generation_weights_per_cycle_per_core"] = floor
        out[precision] = figures
    return out


def fit_measured_fraction(rows: list[BenchRow], current: float) -> float:
    """Fraction of the measured bandwidth that makes the median log error of the fitted tg rows zero."""
    logs = [math.log(r.measured_tokens_per_s / r.predicted_tokens_per_s) for r in rows if fitted(r)]
    return current * math.exp(statistics.median(logs))
