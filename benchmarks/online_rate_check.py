"""Online-rate rows: published `vllm bench serve` runs at a request rate (Poisson arrivals), predicted with the load
model `infragen estimate --rate` uses, reported apart from the closed-loop rows. Never fitted.

Reads benchmarks/data/vllm_results/ (sources.yaml: each file's source, model, GPUs and how many engines shared the
arrivals). Each run's engine is predicted at its share of the rate (request_rate / engines) with the run's mean
lengths and vLLM's default scheduler for the GPU; printed: median TPOT, median and p99 TTFT measured vs predicted,
and then `calibrate` on one run predicting the others of the same hardware (calibrate_check.py). Used by
accuracy.py; `python benchmarks/online_rate_check.py` alone too.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibrate_check import Figure, report_lines, trials

DATA = Path(__file__).resolve().parent / "data" / "vllm_results"
#: Figures of a run and the load point field each is compared with (the phase a calibration fits it into).
METRICS = {"median_tpot_ms": ("tpot_s", "decode"), "median_ttft_ms": ("ttft_p50_s", "prefill"),
           "p99_ttft_ms": ("ttft_p99_s", "prefill")}


@dataclass(frozen=True)
class OnlineRun:
    """One run at a finite request rate and how to predict its engine at given calibration factors."""

    file: str
    line: int
    label: str
    gpus: str
    rate_per_engine: float
    input_len: int
    output_len: int
    measured: dict[str, float]
    model_config: str
    precision: str
    gpu: str
    gpus_per_engine: int

    def peak_fractions(self) -> tuple[float, float]:
        """The bandwidth and compute shares `infragen calibrate` bounds this run's factors by."""
        from infragen.catalog import load_catalog
        from infragen.catalog.hf_config import load_hf_config
        from infragen.sizing.calibration import vllm_peak_fractions
        from infragen.sizing.hardware import hardware_from_gpu

        hw = hardware_from_gpu(load_catalog().accelerator(self.gpu), self.gpus_per_engine)
        return vllm_peak_fractions(load_hf_config(DATA / self.model_config), hw, self.precision, self.gpus_per_engine)

    def point(self, decode: float = 1.0, prefill: float = 1.0) -> dict[str, float]:
        """The load model's figures (ms) at this engine's rate; inf past saturation."""
        return _point(self.model_config, self.gpu, self.gpus_per_engine, self.precision, self.input_len,
                      self.output_len, self.rate_per_engine, decode, prefill)


_CACHE: dict[tuple[object, ...], dict[str, float]] = {}


def _point(config: str, gpu: str, gpus: int, precision: str, input_len: int, output_len: int, rate: float,
           decode: float, prefill: float) -> dict[str, float]:
    key = (config, gpu, gpus, precision, input_len, output_len, rate, decode, prefill)
    if key not in _CACHE:
        from infragen.catalog import load_catalog
        from infragen.catalog.hf_config import load_hf_config
        from infragen.sizing.hardware import hardware_from_gpu
        from infragen.sizing.load_estimate import LoadModel, prepare_load

        model = load_hf_config(DATA / config)
        hw = hardware_from_gpu(load_catalog().accelerator(gpu), gpus)
        load = prepare_load(model, hw, precision=precision, tp=gpus, input_len=input_len, output_len=output_len,
                            decode_factor=decode, prefill_factor=prefill)
        if not isinstance(load, LoadModel):
            raise ValueError(f"{config} on {gpus} x {gpu}: {load.reason}")
        p = load.at(rate, quantiles=(0.5, 0.99))
        _CACHE[key] = {m: getattr(p, field) * 1e3 if p.stable else math.inf for m, (field, _) in METRICS.items()}
    return _CACHE[key]


def online_runs(data: Path = DATA) -> list[OnlineRun]:
    """Every run at a finite request rate in the files sources.yaml lists."""
    doc = yaml.safe_load((data / "sources.yaml").read_text())
    out = []
    for entry in doc["files"]:
        lines = (data / entry["file"]).read_text().splitlines()
        for i, line in enumerate(x for x in lines if x.strip()):
            r = json.loads(line)
            rate = r.get("request_rate")
            if not isinstance(rate, int | float) or not math.isfinite(rate) or r.get("max_concurrency"):
                continue  # `inf` and closed-loop runs are no online-rate rows
            n = r["completed"]
            label = " ".join(str(r[k]) for k in ("deployment",) if k in r) or entry["file"]
            out.append(OnlineRun(entry["file"], i, f"{label} {rate:g}/s", f"{entry['gpus_per_engine']} x "
                                 f"{entry['gpu']}", rate / entry["engines"], round(r["total_input_tokens"] / n),
                                 round(r["total_output_tokens"] / n),
                                 {m: float(r[m]) for m in METRICS if r.get(m)}, entry["model_config"],
                                 entry["precision"], entry["gpu"], entry["gpus_per_engine"]))
    return out


def figures(runs: list[OnlineRun]) -> list[Figure]:
    """The runs' median TPOT and TTFT as calibrate_check figures (one result per run, by GPUs and model)."""
    out = []
    for run in runs:
        for metric in ("median_tpot_ms", "median_ttft_ms"):
            if metric not in run.measured:
                continue

            def predict(d: float, p: float, run: OnlineRun = run, metric: str = metric) -> float:
                return run.point(d, p)[metric]

            out.append(Figure(f"{run.file}[{run.line}] {run.label}", f"vllm on {run.gpus}", run.model_config,
                              metric, METRICS[metric][1], run.measured[metric], predict, as_time=True,
                              fractions=run.peak_fractions()))
    return out


def report() -> list[str]:
    """accuracy.py's section: every online run measured vs predicted, the median errors, then calibrate trials."""
    runs = online_runs()
    lines = ["\nonline-rate rows (published vllm bench serve runs at a Poisson request rate, "
             "benchmarks/data/vllm_results/; the load model of `estimate --rate` at each engine's share of the "
             "rate; never fitted):"]
    if not runs:
        return [*lines, "  none"]
    errs: dict[str, list[float]] = {m: [] for m in METRICS}
    unstable = 0
    for run in runs:
        pred = run.point()
        if math.isinf(pred["median_tpot_ms"]):
            unstable += 1
        parts = []
        for m, v in run.measured.items():
            e = pred[m] / v - 1.0
            if math.isfinite(e):
                errs[m].append(e)
            parts.append(f"{m.removesuffix('_ms')} {v:.1f} vs {pred[m]:.1f} ({e:+.0%})")
        lines.append(f"  {run.label:<16} {run.gpus} {run.rate_per_engine:g}/s per engine, {run.input_len} + "
                     f"{run.output_len} tokens: " + "; ".join(parts))
    for m, e in errs.items():
        if e:
            lines.append(f"  {m}: n={len(e)} median|err| {statistics.median(abs(x) for x in e):.1%} "
                         f"bias {statistics.median(e):+.1%} (stable predictions only)")
    if unstable:
        lines.append(f"  {unstable} of {len(runs)} runs predicted past saturation (the model's capacity is below "
                     "the engine's share of the rate while the run's latencies say it kept up)")
    lines += report_lines("calibrate on one online run, predict the others of the same GPUs:",
                          trials(figures(runs), "vllm"), verbose=False)
    return lines


if __name__ == "__main__":
    print("\n".join(report()))
