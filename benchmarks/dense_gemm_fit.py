"""Fit performance.yaml's engines.vllm.linear_kernel on the H200 timing of one decoder layer's dense GEMMs.

The timings give one layer's four GEMMs (qkv, o, gate_up, down) per GPU, cuBLAS bf16 `matmul` and fp8 per-tensor
`_scaled_mm`, CUDA graphs, one H200: benchmarks/data/moe_kernel_h200/dense_gemm_h200.csv (Llama-3.1 8B / 70B at tp
1/2/4/8, M 1 - 256 tokens: decode batches) and the GEMM rows of benchmarks/data/layer_ops_h200/dense_prefill_h200.csv
(the same models and Qwen2.5-0.5B, M 128 - 16384: prefill chunks), summed per layer. Each row is predicted as the
step model predicts a stage's linears (performance.linear_layers_s: 4 x fixed + max(weight bytes / (bandwidth x
read_fraction), FLOPs / (peak x fraction)), the catalog's H200 datasheet 4.8 TB/s and 989 / 1979 TFLOPS) and the
constants are grid-searched for the least mean squared log error: the fixed time and the read fraction shared by both
dtypes, the 16-bit and fp8 compute fractions each on its own rows. No EX row (extra_calibration.csv) is used.
`python benchmarks/dense_gemm_fit.py` prints the fit and its residuals; `--check` only the residuals of the
constants in force.
"""
from __future__ import annotations

import argparse
import csv
import itertools
import math
import statistics
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from infragen.catalog import load_catalog
from infragen.sizing.constants import LinearKernel, load_constants
from infragen.sizing.performance import linear_layers_s

DATA = Path(__file__).resolve().parent / "data" / "moe_kernel_h200" / "dense_gemm_h200.csv"
PREFILL = Path(__file__).resolve().parent / "data" / "layer_ops_h200" / "dense_prefill_h200.csv"
GEMM_OPS = ("qkv", "o", "gate_up", "down")
GPU = "h200-141gb"
#: GEMMs of one Llama decoder layer as vLLM fuses them (qkv, o, gate_up, down): what each row times.
GEMMS_PER_ROW = 4


@dataclass(frozen=True)
class GemmRow:
    case: str
    tp: int
    fp8: bool
    tokens: int
    weight_bytes: float
    flops: float
    measured_s: float


def gemm_rows(path: Path = DATA, prefill: Path | None = PREFILL) -> list[GemmRow]:
    """The timings' layers with the weight bytes and FLOPs the model counts for them (2 x weights x M)."""
    out = []
    with open(path, encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            if r.get("error") or not r.get("layer_us"):
                continue
            fp8 = r["dtype"] == "fp8"
            weights = float(r["bytes_touched"]) / (1.0 if fp8 else 2.0)
            m = int(r["M"])
            out.append(GemmRow(r["case"], int(r["tp"]), fp8, m, float(r["bytes_touched"]), 2.0 * weights * m,
                               float(r["layer_us"]) * 1e-6))
    if prefill is None:
        return out
    layers: dict[tuple[str, str, int, int], list[tuple[float, float]]] = {}
    with open(prefill, encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            if r["op"] in GEMM_OPS and not r["error"] and r["us"]:
                weights = int(r["N"]) * int(r["K"])
                layers.setdefault((r["case"], r["dtype"], int(r["tp"]), int(r["M"])), []).append(
                    (float(weights), float(r["us"]) * 1e-6))
    for (case, dtype, tp, m), parts in layers.items():
        if len(parts) != len(GEMM_OPS):
            continue
        fp8 = dtype == "fp8"
        weights = sum(w for w, _ in parts)
        out.append(GemmRow(f"{case}-{dtype}", tp, fp8, m, weights * (1.0 if fp8 else 2.0), 2.0 * weights * m,
                           sum(t for _, t in parts)))
    return out


@lru_cache(maxsize=1)
def _h200() -> tuple[float, float, float]:
    """Datasheet bandwidth (bytes/s), 16-bit and fp8 tensor peaks (FLOP/s) of the catalog's H200."""
    acc = load_catalog().accelerator(GPU)
    return acc.memory_bandwidth_gb_per_s * 1e9, acc.bf16_tflops * 1e12, acc.fp8_tflops * 1e12


def predict(k: LinearKernel, row: GemmRow) -> float:
    bandwidth, bf16, fp8 = _h200()
    return linear_layers_s(k, GEMMS_PER_ROW, row.weight_bytes, row.flops, bandwidth, fp8 if row.fp8 else bf16,
                           row.fp8)


def log_errors(k: LinearKernel, rows: list[GemmRow]) -> list[float]:
    return [math.log(predict(k, r) / r.measured_s) for r in rows]


def fit(rows: list[GemmRow], base: LinearKernel) -> LinearKernel:
    """Grid search: fixed time 0 - 8 us by 0.1, read fraction 0.70 - 1.00 by 0.005; for each, the 16-bit and fp8
    compute fractions (0.30 - 0.95 by 0.01) on their own rows. The search evaluates linear_layers_s's formula in
    plain floats (the result is checked against linear_layers_s itself by report())."""
    bandwidth, bf16, fp8 = _h200()
    fractions = [x / 100 for x in range(30, 96)]
    parts = {fp: [(r.weight_bytes / bandwidth, r.flops / (fp8 if fp else bf16), math.log(r.measured_s))
                  for r in rows if r.fp8 == fp] for fp in (False, True)}
    best: tuple[float, dict[str, float]] | None = None
    for fixed, read in itertools.product([x / 10 for x in range(0, 81)], [x / 200 for x in range(140, 201)]):
        loss, chosen = 0.0, {"fixed_us": fixed, "read_fraction": read}
        for key, fp in (("compute_fraction", False), ("fp8_compute_fraction", True)):
            base_s = GEMMS_PER_ROW * fixed * 1e-6
            scored = []
            for f in fractions:
                sq = 0.0
                for stream, compute, log_measured in parts[fp]:
                    e = math.log(base_s + max(stream / read, compute / f)) - log_measured
                    sq += e * e
                scored.append((sq, f))
            part_loss, chosen[key] = min(scored)
            loss += part_loss
        if best is None or loss < best[0]:
            best = (loss, chosen)
    assert best is not None
    return base.model_copy(update=best[1])


def report(k: LinearKernel, rows: list[GemmRow]) -> None:
    errs = log_errors(k, rows)
    absolute = sorted(abs(math.expm1(e)) for e in errs)
    print(f"fixed_us {k.fixed_us:g}  read_fraction {k.read_fraction:g}  compute_fraction {k.compute_fraction:g}  "
          f"fp8_compute_fraction {k.fp8_compute_fraction:g}")
    print(f"{len(rows)} rows: median |error| {statistics.median(absolute):.1%}, 90th pct "
          f"{absolute[int(0.9 * len(absolute))]:.1%}, max {absolute[-1]:.1%}")
    for tp in sorted({r.tp for r in rows}):
        part = [abs(math.expm1(e)) for e, r in zip(errs, rows, strict=True) if r.tp == tp]
        print(f"  tp {tp}: n={len(part)} median |error| {statistics.median(part):.1%}")
    worst = sorted(zip(errs, rows, strict=True), key=lambda x: -abs(x[0]))[:8]
    for e, r in worst:
        print(f"  {r.case:26s} M={r.tokens:5d} measured {r.measured_s * 1e6:8.1f} us  predicted "
              f"{r.measured_s * math.exp(e) * 1e6:8.1f} us ({math.expm1(e):+.0%})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="residuals of the constants in force, no fit")
    args = ap.parse_args()
    rows = gemm_rows()
    k = load_constants().engines["vllm"].linear_kernel
    if k is None:
        k = LinearKernel(fixed_us=4.5, read_fraction=0.88, compute_fraction=0.7, fp8_compute_fraction=0.7,
                         measured="-", fitted_on="-")
    report(k if args.check else fit(rows, k), rows)


if __name__ == "__main__":
    main()
