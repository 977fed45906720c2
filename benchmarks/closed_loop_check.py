"""Closed-loop rows: published `vllm bench serve` runs whose `--max-concurrency` cap bound them (regime "closed" of
online_rate_check), predicted with `estimate()` at that concurrency, as `infragen calibrate` predicts a
closed-loop result (cli/calibrate_cmd.py _vllm_result). Never fitted; reported by GPU.

Each run's engine is predicted at ceil(max_concurrency / engines) running requests with the run's mean prompt and
output lengths; printed: TPOT (median, else mean), median TTFT and output tokens/s per engine, measured vs
predicted. `--kv-sweep 0.408,0.6,0.8` repeats the closed-loop and online-rate errors with
engines.vllm.kv_bandwidth_fraction overridden in-process (constants.OVERRIDE; performance.yaml is not changed).
Used by accuracy.py; `python benchmarks/closed_loop_check.py [--kv-sweep F,...]` alone too.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import online_rate_check
from online_rate_check import DATA, documents, entries, regime

#: Measured figures of a closed-loop run, each compared with the Estimate field named here.
FIGURES = {"median_tpot_ms": "tpot_ms", "mean_tpot_ms": "tpot_ms", "median_ttft_ms": "ttft_ms",
           "output_throughput": "output_tokens_per_s"}


@dataclass(frozen=True)
class ClosedRun:
    """One run a max_concurrency cap bound, per engine, and how to predict it."""

    file: str
    line: int
    label: str
    gpus: str
    concurrency: int
    input_len: int
    output_len: int
    measured: dict[str, float]
    model_config: str
    precision: str
    gpu: str
    gpus_per_engine: int

    def predicted(self) -> dict[str, float]:
        """estimate()'s figures for this engine at the run's concurrency (ms; output tokens/s per engine)."""
        return _predict(self.model_config, self.gpu, self.gpus_per_engine, self.precision, self.input_len,
                        self.output_len, self.concurrency)

    def errors(self) -> dict[str, float]:
        """predicted / measured - 1 per measured figure (TTFT left out past the model's KV capacity, as
        calibrate does: the model has no queue for a closed loop larger than the batch it fits)."""
        pred = self.predicted()
        return {m: pred[m] / v - 1.0 for m, v in self.measured.items() if math.isfinite(pred[m])}


_CACHE: dict[tuple[object, ...], dict[str, float]] = {}


def _predict(config: str, gpu: str, gpus: int, precision: str, input_len: int, output_len: int,
             concurrency: int) -> dict[str, float]:
    key = (config, gpu, gpus, precision, input_len, output_len, concurrency)
    if key not in _CACHE:
        from infragen.catalog import load_catalog
        from infragen.catalog.hf_config import load_hf_config
        from infragen.sizing.estimate import estimate
        from infragen.sizing.hardware import hardware_from_gpu

        hw = hardware_from_gpu(load_catalog().accelerator(gpu), gpus)
        est = estimate(load_hf_config(DATA / config), hw, precision=precision, engine="vllm", tp=gpus,
                       input_len=input_len, output_len=output_len, concurrency=concurrency)
        if not est.fits:
            raise ValueError(f"{config} on {gpus} x {gpu}: {est.reason}")
        ttft = est.ttft_ms if concurrency <= est.max_concurrency else math.inf
        _CACHE[key] = {"median_tpot_ms": est.tpot_ms, "mean_tpot_ms": est.tpot_ms, "median_ttft_ms": ttft,
                       "output_throughput": est.output_tokens_per_s}
    return _CACHE[key]


def closed_runs(data: Path = DATA) -> list[ClosedRun]:
    """Every run of the files sources.yaml lists that its max_concurrency cap bound."""
    out = []
    for entry in entries(data):
        docs = documents(entry, data)
        for i, r in enumerate(docs):
            if regime(r) != "closed":
                continue
            n, engines = float(r["completed"]), int(entry["engines"])
            measured = {m: float(r[m]) for m in FIGURES if r.get(m)}
            if "median_tpot_ms" in measured:
                measured.pop("mean_tpot_ms", None)  # the median when printed, else the mean
            measured["output_throughput"] /= engines
            label = str(entry["file"]).removesuffix(".log").removesuffix(".jsonl") + (f"[{i}]" if len(docs) > 1 else "")
            out.append(ClosedRun(str(entry["file"]), i, label, f"{entry['gpus_per_engine']} x {entry['gpu']}",
                                 max(1, math.ceil(float(r["max_concurrency"]) / engines)),
                                 max(1, round(r["total_input_tokens"] / n)),
                                 max(2, round(r["total_output_tokens"] / n)), measured, entry["model_config"],
                                 entry["precision"], entry["gpu"], int(entry["gpus_per_engine"])))
    return out


def _median_abs(values: list[float]) -> str:
    return f"{statistics.median(abs(v) for v in values):.1%}" if values else "n/a"


def report() -> list[str]:
    """accuracy.py's section: each closed-loop run measured vs predicted, by GPU, and the median errors."""
    runs = closed_runs()
    lines = ["\nclosed-loop rows (published vllm bench serve runs at --max-concurrency, benchmarks/data/vllm_results/; "
             "estimate() at each engine's concurrency and the run's mean lengths, as `infragen calibrate`; never "
             "fitted; predicted / measured - 1):"]
    if not runs:
        return [*lines, "  none"]
    for gpus in sorted({run.gpus for run in runs}):
        group = [run for run in runs if run.gpus == gpus]
        lines.append(f"  vllm on {gpus}:")
        errs: dict[str, list[float]] = {}
        for run in group:
            pred, parts = run.predicted(), []
            for m, v in run.measured.items():
                e = pred[m] / v - 1.0
                if math.isfinite(e):
                    errs.setdefault(m, []).append(e)
                name = m.removesuffix("_ms").replace("output_throughput", "tok/s")
                parts.append(f"{name} {v:.1f} vs {pred[m]:.1f} ({e:+.0%})" if math.isfinite(e) else
                             f"{name} {v:.1f} vs - (past the model's KV capacity)")
            lines.append(f"    {run.label:<34} c={run.concurrency:<4} {run.input_len} + {run.output_len} tokens: "
                         + "; ".join(parts))
        for m, e in errs.items():
            lines.append(f"    {m}: n={len(e)} median|err| {_median_abs(e)} bias {statistics.median(e):+.1%}")
    return lines


@contextmanager
def kv_bandwidth_fraction(value: float) -> Iterator[None]:
    """engines.vllm.kv_bandwidth_fraction = value in-process (constants.OVERRIDE), caches dropped on entry and exit;
    performance.yaml is not touched."""
    from infragen.sizing import constants as constants_mod

    def clear() -> None:
        from infragen.sizing.memory import vllm_memory
        from infragen.sizing.performance import gpu_setup

        _CACHE.clear()
        online_rate_check._CACHE.clear()
        gpu_setup.cache_clear()
        vllm_memory.cache_clear()

    doc = constants_mod.load_constants().model_dump()
    doc["engines"]["vllm"]["kv_bandwidth_fraction"] = value
    before = list(constants_mod.OVERRIDE)
    constants_mod.OVERRIDE[:] = [constants_mod.PerformanceConstants.model_validate(doc)]
    clear()
    try:
        yield
    finally:
        constants_mod.OVERRIDE[:] = before
        clear()


def kv_sweep(fractions: list[float]) -> list[str]:
    """Each closed-loop and online-rate run's TPOT / TTFT / tok/s errors at each kv_bandwidth_fraction."""
    table: dict[str, list[str]] = {}
    for f in fractions:
        with kv_bandwidth_fraction(f):
            for run in closed_runs():
                errs = run.errors()
                table.setdefault(f"{run.gpus} {run.label} (c={run.concurrency})", []).append(
                    " / ".join(f"{errs[m]:+.0%}" if m in errs else "-" for m in run.measured))
            for orun in online_rate_check.online_runs():
                pred = orun.point()
                cells = [f"{pred[m] / v - 1:+.0%}" if math.isfinite(pred[m]) else "unstable"
                         for m, v in orun.measured.items()]
                table.setdefault(f"{orun.gpus} {orun.label} ({orun.rate_per_engine:g}/s per engine)", []).append(
                    " / ".join(cells))
    head = "| run (closed: TPOT / TTFT / tok/s; online: TPOT / TTFT p50 / p99) | " + " | ".join(
        f"{f:g}" for f in fractions) + " |"
    return [head, "|---" * (len(fractions) + 1) + "|", *(f"| {k} | " + " | ".join(v) + " |" for k, v in table.items())]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kv-sweep", help="comma-separated kv_bandwidth_fraction values (in-process override)")
    args = parser.parse_args()
    if args.kv_sweep:
        print("\n".join(kv_sweep([float(x) for x in args.kv_sweep.split(",")])))
    else:
        print("\n".join(report()))


if __name__ == "__main__":
    main()
