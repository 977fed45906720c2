"""Online-rate rows: published `vllm bench serve` runs at a request rate (Poisson arrivals), predicted with the load
model `infragen estimate --rate` uses, reported apart from the closed-loop rows. Never fitted.

Reads benchmarks/data/vllm_results/ (sources.yaml: each file's source, model, GPUs and how many engines shared the
arrivals): `--save-result` JSON lines, or the printed "Serving Benchmark Result" block of a run's log
(`format: printed`). Each run is classed by what bound it (`regime`): an online run (finite rate, the concurrency
cap, if any, far from reached) is predicted here, a closed loop (max_concurrency reached) by closed_loop_check.py.
Each online run's engine is predicted at its share of the rate (request_rate / engines) with the run's mean
lengths and vLLM's default scheduler for the GPU; printed: TPOT (median, else mean), median and p99 TTFT measured
vs predicted, and then `calibrate` on one run predicting the others of the same hardware (calibrate_check.py).
Used by accuracy.py; `python benchmarks/online_rate_check.py` alone too.
"""

from __future__ import annotations

import functools
import json
import math
import re
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibrate_check import Figure, report_lines, trials

from infragen.sizing.load_estimate import LoadModel

DATA = Path(__file__).resolve().parent / "data" / "vllm_results"
#: Figures of a run and the load point field each is compared with (the phase a calibration fits it into).
METRICS = {"median_tpot_ms": ("tpot_s", "decode"), "mean_tpot_ms": ("tpot_s", "decode"),
           "median_ttft_ms": ("ttft_p50_s", "prefill"), "p99_ttft_ms": ("ttft_p99_s", "prefill")}
#: A run is a closed loop when Little's law puts at least this share of max_concurrency in flight (the cap bound
#: it), an online run when at most LOW_SHARE (the arrivals bound it); in between both did and it is left out.
CLOSED_SHARE = 0.9
LOW_SHARE = 0.5
#: Printed result lines (`vllm bench serve` / benchmark_serving.py) -> the `--save-result` key they print.
_PRINTED = {"Successful requests": "completed", "Maximum request concurrency": "max_concurrency",
            "Request rate configured (RPS)": "request_rate", "Benchmark duration (s)": "duration",
            "Total input tokens": "total_input_tokens", "Total generated tokens": "total_output_tokens",
            "Request throughput (req/s)": "request_throughput", "Output token throughput (tok/s)": "output_throughput"}
_STAT = re.compile(r"^(Mean|Median|P99) (TTFT|TPOT|ITL|E2EL) \(ms\):\s+([0-9.]+)\s*$")


def parse_printed(text: str) -> dict[str, float]:
    """The figures of the one "Serving Benchmark Result" block in a `vllm bench serve` log, under the keys
    `--save-result` writes them with (completed, max_concurrency, request_rate, median_ttft_ms, mean_itl_ms...).
    The rate comes from "Request rate configured" or the "Traffic request rate:" line (inf when so printed)."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if "Serving Benchmark Result" in line]
    if len(starts) != 1:
        raise ValueError(f"expected one 'Serving Benchmark Result' block, found {len(starts)}")
    doc: dict[str, float] = {}
    for line in lines[:starts[0]]:
        if line.startswith("Traffic request rate:"):
            doc["request_rate"] = float(line.split(":", 1)[1])
        elif line.startswith("Maximum request concurrency:"):  # older blocks print it only here
            doc["max_concurrency"] = float(line.split(":", 1)[1])
    for line in lines[starts[0] + 1:]:
        if line.startswith("=" * 10):
            break
        stat = _STAT.match(line.strip())
        if stat:
            kind = {"Mean": "mean", "Median": "median", "P99": "p99"}[stat[1]]
            doc[f"{kind}_{stat[2].lower()}_ms"] = float(stat[3])
        elif ":" in line:
            label, value = (x.strip() for x in line.split(":", 1))
            if label in _PRINTED:
                doc[_PRINTED[label]] = float(value)
    missing = {"completed", "total_input_tokens", "total_output_tokens", "request_throughput",
               "output_throughput"} - set(doc)
    if missing:
        raise ValueError(f"result block lacks {sorted(missing)}")
    return doc


def documents(entry: dict[str, Any], data: Path = DATA) -> list[dict[str, Any]]:
    """The results of one sources.yaml entry: each JSON line of a `--save-result` file (those whose metadata match
    the entry's `select`), or the printed block of a log (`format: printed`). A printed run without TPOT lines
    whose outputs all had the entry's `output_len` gets mean_tpot_ms = (mean E2EL - mean TTFT) / (output_len - 1):
    each request's own TPOT, averaged."""
    text = (data / str(entry["file"])).read_text()
    if entry.get("format", "save-result") != "printed":
        docs = [json.loads(line) for line in text.splitlines() if line.strip()]
        select = entry.get("select") or {}  # metadata a run must carry (another engine's runs share the file)
        return [d for d in docs if all(d.get(k) == v for k, v in select.items())]
    doc: dict[str, Any] = dict(parse_printed(text))
    out_len = entry.get("output_len")
    if ("mean_tpot_ms" not in doc and isinstance(out_len, int) and out_len > 1
            and doc["total_output_tokens"] == doc["completed"] * out_len and "mean_e2el_ms" in doc):
        doc["mean_tpot_ms"] = (float(doc["mean_e2el_ms"]) - float(doc["mean_ttft_ms"])) / (out_len - 1)
    return [doc]


def regime(doc: dict[str, Any]) -> str:
    """What bound the run: "online" (a finite rate, any concurrency cap far from reached), "closed" (the
    max_concurrency cap reached: Little's law puts >= CLOSED_SHARE of it in flight), "burst" (rate inf, no cap)
    or "mixed" (a rate and a cap, both binding: neither model applies)."""
    rate, cap = doc.get("request_rate"), doc.get("max_concurrency")
    finite = isinstance(rate, int | float) and not isinstance(rate, bool) and math.isfinite(rate) and rate > 0
    if not cap:
        return "online" if finite else "burst"
    in_flight = in_flight_requests(doc)
    if in_flight >= CLOSED_SHARE * cap:
        return "closed"
    if finite and in_flight <= LOW_SHARE * cap:
        return "online"
    return "mixed"


def in_flight_requests(doc: dict[str, Any]) -> float:
    """Mean requests in flight over the run, by Little's law: request throughput x mean end-to-end latency
    (without mean_e2el_ms, which older runs leave out: mean TTFT + (output - 1) x TPOT)."""
    if "mean_e2el_ms" in doc:
        e2e_ms = float(doc["mean_e2el_ms"])
    else:
        tpot = doc.get("mean_tpot_ms") or doc.get("median_tpot_ms") or 0.0
        e2e_ms = float(doc["mean_ttft_ms"]) + (doc["total_output_tokens"] / doc["completed"] - 1) * float(tpot)
    return float(doc["request_throughput"]) * e2e_ms / 1e3


def entries(data: Path = DATA) -> list[dict[str, Any]]:
    """sources.yaml's file entries."""
    return list(yaml.safe_load((data / "sources.yaml").read_text())["files"])


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
    throughput_share: float = 1.0
    """Measured request throughput / request rate (a finite run's includes the drain of its last requests, so a
    run that kept up lands somewhat under 1; far under, its queue grew)."""
    output_per_engine: float = 0.0
    """Measured output tokens/s of one engine (the run's output_throughput / engines)."""

    def peak_fractions(self) -> tuple[float, float]:
        """The bandwidth and compute shares `infragen calibrate` bounds this run's factors by."""
        from infragen.catalog import load_catalog
        from infragen.catalog.hf_config import load_hf_config
        from infragen.sizing.calibration import vllm_peak_fractions
        from infragen.sizing.hardware import hardware_from_gpu

        hw = hardware_from_gpu(load_catalog().accelerator(self.gpu), self.gpus_per_engine)
        return vllm_peak_fractions(load_hf_config(DATA / self.model_config), hw, self.precision, self.gpus_per_engine)

    def shape(self) -> str:
        """The model's speed shape: a profile of this run calibrates only runs of the same shapes (as `plan` and
        `estimate` apply one, Calibration.for_model)."""
        from infragen.catalog.hf_config import load_hf_config

        return load_hf_config(DATA / self.model_config).speed_shape()

    def point(self, decode: float = 1.0, prefill: float = 1.0) -> dict[str, float]:
        """The load model's figures (ms) at this engine's rate; inf past saturation."""
        return _point(self.model_config, self.gpu, self.gpus_per_engine, self.precision, self.input_len,
                      self.output_len, self.rate_per_engine, decode, prefill)

    def capacity_per_s(self, decode: float = 1.0, prefill: float = 1.0) -> float:
        """The load model's capacity (requests/s of one engine) at this run's lengths."""
        return _load(self.model_config, self.gpu, self.gpus_per_engine, self.precision, self.input_len,
                     self.output_len, decode, prefill).capacity_per_s()


_CACHE: dict[tuple[object, ...], dict[str, float]] = {}


@functools.cache
def _load(config: str, gpu: str, gpus: int, precision: str, input_len: int, output_len: int, decode: float,
          prefill: float) -> LoadModel:
    from infragen.catalog import load_catalog
    from infragen.catalog.hf_config import load_hf_config
    from infragen.sizing.hardware import hardware_from_gpu
    from infragen.sizing.load_estimate import prepare_load

    model = load_hf_config(DATA / config)
    hw = hardware_from_gpu(load_catalog().accelerator(gpu), gpus)
    load = prepare_load(model, hw, precision=precision, tp=gpus, input_len=input_len, output_len=output_len,
                        decode_factor=decode, prefill_factor=prefill)
    if not isinstance(load, LoadModel):
        raise ValueError(f"{config} on {gpus} x {gpu}: {load.reason}")
    return load


def _point(config: str, gpu: str, gpus: int, precision: str, input_len: int, output_len: int, rate: float,
           decode: float, prefill: float) -> dict[str, float]:
    key = (config, gpu, gpus, precision, input_len, output_len, rate, decode, prefill)
    if key not in _CACHE:
        p = _load(config, gpu, gpus, precision, input_len, output_len, decode, prefill).at(rate, quantiles=(0.5, 0.99))
        _CACHE[key] = {m: getattr(p, field) * 1e3 if p.stable else math.inf for m, (field, _) in METRICS.items()}
    return _CACHE[key]


def online_runs(data: Path = DATA) -> list[OnlineRun]:
    """Every online run (regime "online": a finite request rate) in the files sources.yaml lists."""
    out = []
    for entry in entries(data):
        for i, r in enumerate(documents(entry, data)):
            if regime(r) != "online":
                continue  # `inf`, closed-loop and mixed runs are no online-rate rows
            rate, n = float(r["request_rate"]), float(r["completed"])
            label = (" ".join(str(r[k]) for k in ("deployment",) if k in r)
                     or str(entry["file"]).removesuffix(".log").removesuffix("-results.jsonl"))
            measured = {m: float(r[m]) for m in METRICS if r.get(m)}
            if "median_tpot_ms" in measured:
                measured.pop("mean_tpot_ms", None)  # the median when printed, else the mean
            out.append(OnlineRun(str(entry["file"]), i, f"{label} {rate:g}/s", f"{entry['gpus_per_engine']} x "
                                 f"{entry['gpu']}", rate / entry["engines"], round(r["total_input_tokens"] / n),
                                 round(r["total_output_tokens"] / n), measured, entry["model_config"],
                                 entry["precision"], entry["gpu"], entry["gpus_per_engine"],
                                 float(r["request_throughput"]) / rate,
                                 float(r["output_throughput"]) / entry["engines"]))
    return out


def figures(runs: list[OnlineRun]) -> list[Figure]:
    """The runs' median TPOT and TTFT as calibrate_check figures (one result per run, by GPUs and model); a run the
    model puts past capacity gives its output throughput as a floor of the capacity instead, as calibrate reads it
    (cli/calibrate_cmd.py _online_result)."""
    out = []
    for run in runs:
        if not math.isfinite(run.point()[next(iter(METRICS))]):
            served = run.output_per_engine

            def capacity(d: float, p: float, run: OnlineRun = run) -> float:
                return run.capacity_per_s(d, p) * run.output_len

            out.append(Figure(f"{run.file}[{run.line}] {run.label}", f"vllm on {run.gpus}", run.model_config,
                              "output_throughput_floor", "decode", served, capacity,
                              fractions=run.peak_fractions(), at_least=True, shape=run.shape()))
            continue
        for metric in ("median_tpot_ms", "mean_tpot_ms", "median_ttft_ms"):
            if metric not in run.measured:
                continue

            def predict(d: float, p: float, run: OnlineRun = run, metric: str = metric) -> float:
                return run.point(d, p)[metric]

            out.append(Figure(f"{run.file}[{run.line}] {run.label}", f"vllm on {run.gpus}", run.model_config,
                              metric, METRICS[metric][1], run.measured[metric], predict, as_time=True,
                              fractions=run.peak_fractions(), serving_path=metric == "median_ttft_ms",
                              shape=run.shape()))
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
    unstable = []
    for run in runs:
        pred = run.point()
        if math.isinf(pred["median_tpot_ms"]):
            served = run.rate_per_engine * run.throughput_share
            unstable.append(f"{run.label} ({run.throughput_share:.2f}: served {served:.2f}/s, model capacity "
                            f"{run.capacity_per_s():.2f}/s)")
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
        lines.append(f"  {len(unstable)} of {len(runs)} runs predicted past saturation (the model's capacity is below "
                     "the engine's share of the rate; measured request throughput / rate in brackets, and what one "
                     "engine served against the model's capacity at the run's lengths, a floor of the engine's "
                     "capacity since each run ended before its queue settled): "
                     + ", ".join(unstable))
    figs = figures(runs)
    floors = sum(f.at_least for f in figs)
    lines += report_lines("calibrate on one online run, predict the others of the same GPUs (a run past the "
                          "model's capacity gives its output throughput as a floor, as `infragen calibrate` reads "
                          f"it: {floors} of the {len(figs)} figures; only a prediction below a floor counts as an "
                          "error):",
                          trials(figs, "vllm"), verbose=False)
    return lines


if __name__ == "__main__":
    print("\n".join(report()))
