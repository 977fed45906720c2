"""The issue's calibrate target, measured: after `infragen calibrate` on ONE result, the other results of the same
hardware (and engine) within 10 %.

Independent data only (no fit of performance.yaml used these rows for the figures they feed... see each source):
the vLLM >= 0.6 speed rows of benchmarks/data/extra_calibration.csv (the EX rows), grouped into results (one run:
source, GPUs, model, precision, lengths, concurrency), and the llama-bench runs of benchmarks/data/llama_bench/
(one file = one result: pp512 and tg128 of one weight type), grouped by the probed CPU. For every hardware with
at least two results, each result in turn calibrates (sizing/calibration.py, the fit `infragen calibrate` runs)
and the others are predicted with its factors (and, where its TTFTs measured the serving path rather than
prefill, with that path: calibration.fit_calibration); printed: the share of the other figures within 10 % and the
median absolute error before and after. Used by accuracy.py; `python benchmarks/calibrate_check.py` alone too.
"""

from __future__ import annotations

import statistics
import sys
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from infragen.sizing.calibration import (
    Observation,
    Phase,
    fit_calibration,
    physical_bounds,
    relative_error,
    serving_ms,
    vllm_peak_fractions,
)

#: The issue's target: the other rows of the same hardware within 10 % after calibrating on one result.
TARGET = 0.10
#: Metrics of the EX rows a calibration uses (memory rows are no speed) and the phase each feeds, as calibrate reads
#: them from a `vllm bench serve` result (output_throughput and TPOT: generation; TTFT: prompt).
_VLLM_PHASE: dict[str, Phase] = {"output_tokens_per_s": "decode", "tpot_ms": "decode", "ttft_ms": "prefill"}


@dataclass(frozen=True)
class Figure:
    """One measured figure and the model's prediction of it at given (generation, prompt) factors."""

    result: str
    """The result (run) it belongs to: what one `calibrate` call would read."""
    hardware: str
    """Hardware and engine: results calibrate each other only within one."""
    setup: str
    """Also the engine version, model and weight type: what one user calibrating their own deployment shares."""
    metric: str
    phase: Phase
    measured: float
    predict: Callable[[float, float], float]
    as_time: bool = False
    """A time (ms): lower is faster."""
    fractions: tuple[float, float] | None = None
    """vLLM: the largest bandwidth and compute shares the run's setup is modelled at (the physical bounds
    `infragen calibrate` fits its factors within); None: llama.cpp's bounds."""
    shape: str = ""
    """ModelArchitecture.speed_shape of the model it ran: a calibration applies only to figures of its own shapes, as
    `estimate`/`plan` apply a profile (Calibration.for_model)."""
    serving_path: bool = False
    """A TTFT holding the serving path once (vLLM), which a calibrated path moves."""
    at_least: bool = False
    """A floor (an online run past the model's capacity: its output throughput), as calibrate fits it; only a
    prediction below it is an error."""

    def observation(self) -> Observation:
        """The figure as calibrate fits it (times as rates, the model's prediction at any factors)."""
        if self.as_time:
            return Observation(self.result, self.metric, self.phase, 1e3 / self.measured, 1e3 / self.predict(1, 1),
                               as_time=True, model=lambda d, p: 1e3 / self.predict(d, p),
                               serving_path=self.serving_path)
        return Observation(self.result, self.metric, self.phase, self.measured, self.predict(1, 1),
                           model=self.predict, whole_run=self.metric.endswith("output_tokens_per_s") or self.at_least,
                           at_least=self.at_least)

    def error(self, factors: tuple[float, float], serving_delta_ms: float = 0.0) -> float:
        shift = serving_delta_ms if self.serving_path else 0.0
        return relative_error(self.predict(*factors) + shift, self.measured, self.at_least)


def vllm_figures() -> list[Figure]:
    """The EX rows of vLLM >= 0.6 speed metrics that accuracy.py can predict, as figures of their runs."""
    import accuracy
    from calibration_rows import _accelerator, arch, gpu_of, is_current_vllm_check, model_of, precision_of, read_rows

    from infragen.sizing.hardware import hardware_from_gpu

    out = []
    for row in read_rows():
        if not row["id"].startswith("EX") or not is_current_vllm_check(row) or row["metric"] not in _VLLM_PHASE:
            continue
        name, g = model_of(row["model"]), gpu_of(row["hardware"])
        if name is None or g is None:
            continue
        model, acc = arch(name), _accelerator(*g)
        tp, pp = int(row["tp"] or 1), int(row["pp"] or 1)
        hw = hardware_from_gpu(acc, tp * pp)
        measured = float(row["value"])

        def predict(d: float, p: float, row: dict[str, str] = row, model: object = model, acc: object = acc,
                    hw: object = hw, measured: float = measured) -> float:
            with accuracy.engine_profile(accuracy.release_profile(row)):
                o = accuracy._current_vllm_row(row, model, acc, hw, measured, (d, p))  # type: ignore[arg-type]
            if isinstance(o, str):
                raise ValueError(o)
            return float(o.predicted)

        try:
            predict(1.0, 1.0)
        except ValueError:
            continue  # unusable rows are reported by accuracy.py itself
        result = " ".join((row["source"].split()[0], name, row["precision"].split()[0], row["input_len"],
                           row["output_len"], row["concurrency"].split()[0]))
        version = row["engine_version"].split()[0]
        fractions = vllm_peak_fractions(model, hw, precision_of(row["precision"], acc.id), tp)
        out.append(Figure(result, f"vllm on {hw.name}", f"vllm {version} {name} {row['precision'].split()[0]}",
                          f"{row['id']} {row['metric']}", _VLLM_PHASE[row["metric"]], measured, predict,
                          as_time=row["metric"].endswith("_ms"), fractions=fractions, shape=model.speed_shape(),
                          serving_path=row["metric"] == "ttft_ms"))
    return out


def llama_bench_figures(independent_only: bool = True) -> list[Figure]:
    """The llama-bench results of benchmarks/data/llama_bench/ (best repetition), by probed CPU; with
    `independent_only` the rows that fed a fitted figure (llama_bench_check.FITS) are left out."""
    import json

    from llama_bench_check import _FILE, CONFIGS, DATA, PRECISION, bench_rows, fed

    from infragen.catalog import load_catalog
    from infragen.catalog.hf_config import load_hf_config
    from infragen.sizing.estimate import estimate
    from infragen.sizing.hardware import load_hardware_file

    fitted = {(r.run, r.shape, r.precision, r.test) for r in bench_rows() if fed(r)}
    out = []
    for path in sorted(DATA.glob("llama-bench-*.json")):
        m = _FILE.fullmatch(path.stem)
        if m is None:
            continue
        record = json.loads(path.read_text())
        model = load_hf_config(DATA / CONFIGS[m["shape"]])
        hw = load_hardware_file(DATA / record.get("hardware_file", "machine.yaml"), load_catalog())
        cpu = hw.cpu.microarchitecture if hw.cpu else hw.name
        for r in record["results"]:
            precision = PRECISION[r["model_type"].split()[-1]]
            test = f"tg{r['n_gen']}" if r["n_gen"] > 0 else f"pp{r['n_prompt']}"
            if independent_only and (m["tag"] or "", m["shape"], precision, test) in fitted:
                continue

            def predict(d: float, p: float, r: dict = r, precision: str = precision,  # type: ignore[type-arg]
                        hw: object = hw, model: object = model) -> float:
                if r["n_gen"] > 0:
                    est = estimate(model, hw, precision=precision, engine="llama.cpp", input_len=1,  # type: ignore
                                   output_len=r["n_gen"], concurrency=1, decode_factor=d, prefill_factor=p)
                    return 1e3 / est.tpot_ms
                est = estimate(model, hw, precision=precision, engine="llama.cpp",  # type: ignore[arg-type]
                               input_len=r["n_prompt"], output_len=1, concurrency=1, decode_factor=d,
                               prefill_factor=p)
                return float(r["n_prompt"] / (est.ttft_ms / 1e3))

            out.append(Figure(path.stem.removeprefix("llama-bench-"), f"llama.cpp on {cpu}",
                              f"{m['shape']} {precision}", f"{test} {precision}",
                              "decode" if r["n_gen"] > 0 else "prefill", max(r.get("samples_ts") or [r["avg_ts"]]),
                              predict, shape=model.speed_shape()))
    return out


@dataclass(frozen=True)
class Trial:
    """Calibrated on `result`, the other figures of its hardware: errors before and after."""

    hardware: str
    result: str
    factors: tuple[float, float]
    before: list[float]
    after: list[float]
    serving_ms: float | None = None
    """The serving path it fitted (ms), None when its TTFTs did not measure one."""
    applied: tuple[bool, ...] | None = None
    """Per other figure: whether it ran this result's model shapes (the figures the profile changes); None: all."""


def trials(figures: list[Figure], engine: str, bandwidth_measured: bool = False, by_setup: bool = False,
           ) -> list[Trial]:
    """For each hardware (`by_setup`: hardware, engine version, model and weight type) with >= 2 results:
    calibrate on each result alone, predict the others."""
    by_hw: dict[str, dict[str, list[Figure]]] = defaultdict(lambda: defaultdict(list))
    for f in figures:
        by_hw[f"{f.hardware}, {f.setup}" if by_setup else f.hardware][f.result].append(f)
    out = []
    for hw, results in sorted(by_hw.items()):
        if len(results) < 2:
            continue
        for result, own in sorted(results.items()):
            bounds = physical_bounds(engine, bandwidth_measured, own[0].fractions)  # as calibrate bounds this run
            fit = fit_calibration([f.observation() for f in own], bounds, serving_ms(engine))
            factors = (fit.decode, fit.prefill)
            others = [f for r, fs in results.items() if r != result for f in fs]
            applied = [f.shape == own[0].shape for f in others]  # a profile holds for its model's shapes only
            out.append(Trial(hw, result, factors, [f.error((1.0, 1.0)) for f in others],
                             [f.error(factors, fit.serving_delta_ms) if a else f.error((1.0, 1.0))
                              for f, a in zip(others, applied, strict=True)], fit.serving_ms, tuple(applied)))
    return out


def _median_abs(errs: list[float]) -> float:
    return statistics.median(abs(e) for e in errs) if errs else 0.0


def report_lines(title: str, ts: list[Trial], verbose: bool = True) -> list[str]:
    """Per hardware and overall: the share of the other figures within TARGET, median |error| before/after."""
    lines = [title]
    if not ts:
        return [*lines, "  no hardware with two results or more"]
    by_hw: dict[str, list[Trial]] = defaultdict(list)
    for t in ts:
        by_hw[t.hardware].append(t)
    for hw, group in by_hw.items():
        before = [e for t in group for e in t.before]
        after = [e for t in group for e in t.after]
        inside = sum(abs(e) <= TARGET for e in after)
        was = sum(abs(e) <= TARGET for e in before)
        lines.append(f"  {hw}: {len(group)} results, {len(after)} predictions: within {TARGET:.0%} "
                     f"{inside} of {len(after)} ({inside / len(after):.0%}; uncalibrated {was}); median|err| "
                     f"{_median_abs(before):.1%} before -> {_median_abs(after):.1%} after")
        if verbose:
            for t in group:
                path = "" if t.serving_ms is None else f" path {t.serving_ms:.1f} ms"
                lines.append(f"    on {t.result:<58} gen x{t.factors[0]:.3f} prompt x{t.factors[1]:.3f}{path}: "
                             f"others {_median_abs(t.before):5.1%} -> {_median_abs(t.after):5.1%}, within "
                             f"{sum(abs(e) <= TARGET for e in t.after)}/{len(t.after)}")
    after = [e for t in ts for e in t.after]
    before = [e for t in ts for e in t.before]
    inside = sum(abs(e) <= TARGET for e in after)
    was = sum(abs(e) <= TARGET for e in before)
    lines.append(f"  all: {len(after)} predictions, within {TARGET:.0%}: {inside} ({inside / len(after):.0%}; "
                 f"uncalibrated {was}); "
                 f"median|err| {_median_abs(before):.1%} before -> {_median_abs(after):.1%} after; target "
                 f"{'met' if inside == len(after) else 'not met'}")
    pairs = [(b, a) for t in ts for i, (b, a) in enumerate(zip(t.before, t.after, strict=True))
             if t.applied is None or t.applied[i]]
    if len(pairs) < len(after):
        lines.append(f"  of them of the calibrating result's model (the ones a profile changes): {len(pairs)}, within "
                     f"{TARGET:.0%} {sum(abs(a) <= TARGET for _, a in pairs)} (uncalibrated "
                     f"{sum(abs(b) <= TARGET for b, _ in pairs)}); median|err| {_median_abs([b for b, _ in pairs]):.1%}"
                     f" -> {_median_abs([a for _, a in pairs]):.1%}")
    return lines


def report(verbose: bool = True) -> list[str]:
    """accuracy.py's section."""
    head = ("\ncalibrate on one result, predict the other results of the same hardware (the issue's target: within "
            f"{TARGET:.0%}; independent rows only, never fitted):")
    lines = [head]
    vllm = vllm_figures()
    lines += report_lines("vLLM >= 0.6 rows of extra_calibration.csv (EX), by GPUs (any vLLM version, model, type):",
                          trials(vllm, "vllm"), verbose)
    lines += report_lines("the same, by GPUs, vLLM version, model and weight type (one user's own deployment):",
                          trials(vllm, "vllm", by_setup=True), verbose)
    lines += report_lines("llama-bench runs of benchmarks/data/llama_bench/ (never-fitted rows), by probed CPU:",
                          trials(llama_bench_figures(), "llama.cpp", bandwidth_measured=True), verbose)
    return lines


if __name__ == "__main__":
    print("\n".join(report()))
