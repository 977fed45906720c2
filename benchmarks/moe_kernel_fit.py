"""Fit performance.yaml's engines.vllm.moe_kernel on the H200 timing of vLLM 0.34.0's fused-MoE kernel.

The timing (benchmarks/data/moe_kernel_h200/moe_kernel_h200.csv, 1 - 1024 tokens, and moe_kernel_h200_rerun.csv, the
same cases again plus 2048 - 16384 tokens for five of them) gives one MoE layer's time at each per-GPU expert shape
and token count. Each row is predicted the way the step model predicts a layer (performance.moe_kernel_s:
uniform routing's touched experts, the model's M tiles, datasheet bandwidth and peaks of the catalog's H200) and
the four constants are grid-searched for the least mean squared log error. No EX row (extra_calibration.csv) is
used. `python benchmarks/moe_kernel_fit.py` prints the fit and its residuals; `--check` only the residuals of the
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
from infragen.sizing.constants import MoeKernel, load_constants
from infragen.sizing.performance import moe_kernel_s

_DIR = Path(__file__).resolve().parent / "data" / "moe_kernel_h200"
DATA = (_DIR / "moe_kernel_h200.csv", _DIR / "moe_kernel_h200_rerun.csv")
GPU = "h200-141gb"


@dataclass(frozen=True)
class KernelRow:
    case: str
    fp8: bool
    tokens: int
    touched_bytes: float
    padded_flops: float
    measured_s: float
    activation_bytes: float = 0.0


def tile(tokens: float) -> int:
    """The model's M tile for a batch (performance.yaml moe.tile_tokens)."""
    for t in load_constants().moe.tile_tokens:
        if t.max_batch_tokens is None or tokens <= t.max_batch_tokens:
            return t.tile_tokens
    raise AssertionError("the last tile row has no limit")


def kernel_rows(paths: tuple[Path, ...] = DATA) -> list[KernelRow]:
    """The timing's rows, with the bytes and padded FLOPs the model would count for them."""
    out = []
    for r in (r for path in paths for r in csv.DictReader(path.open())):
        if r.get("error") or not r.get("layer_us"):
            continue
        m, e, k, n, h = (int(r[x]) for x in ("M", "E", "topk", "N", "K"))
        fp8 = r["dtype"].startswith("fp8")
        touched = e * (1 - (1 - k / e) ** m)
        t = tile(m)
        pairs = touched * math.ceil(m * k / touched / t - 1e-9) * t
        out.append(KernelRow(r["case"], fp8, m, touched * 3 * n * h * (1 if fp8 else 2), 2 * 3 * n * h * pairs,
                             float(r["layer_us"]) * 1e-6, m * k * 2 * 2 * (3 * n + h)))
    return out


@lru_cache(maxsize=1)
def _h200() -> tuple[float, float, float]:
    """Datasheet bandwidth (bytes/s), 16-bit and fp8 tensor peaks (FLOP/s) of the catalog's H200."""
    acc = load_catalog().accelerator(GPU)
    return acc.memory_bandwidth_gb_per_s * 1e9, acc.bf16_tflops * 1e12, acc.fp8_tflops * 1e12


def predict(k: MoeKernel, row: KernelRow) -> float:
    bandwidth, bf16, fp8 = _h200()
    return moe_kernel_s(k, 1.0, row.touched_bytes, row.padded_flops, bandwidth, fp8 if row.fp8 else bf16, row.fp8,
                        row.activation_bytes)


def log_errors(k: MoeKernel, rows: list[KernelRow]) -> list[float]:
    return [math.log(predict(k, r) / r.measured_s) for r in rows]


def fit(rows: list[KernelRow]) -> MoeKernel:
    """Grid search: fixed time 10-40 us by 1, read fraction 0.60-1.00 by 0.01; for each, the 16-bit and fp8
    compute fractions (0.10-0.70 by 0.02) are searched on their own rows (each touches only its rows)."""
    base = load_constants().engines["vllm"].moe_kernel
    assert base is not None
    fractions = [x / 100 for x in range(10, 71, 2)]
    best: tuple[float, MoeKernel] | None = None
    for fixed, read in itertools.product(range(10, 41), [x / 100 for x in range(60, 101)]):
        loss, chosen = 0.0, {}
        for key, fp8 in (("compute_fraction", False), ("fp8_compute_fraction", True)):
            part = [r for r in rows if r.fp8 == fp8]
            scored = []
            for f in fractions:
                k = base.model_copy(update={"layer_fixed_us": float(fixed), "read_fraction": read, key: f,
                                            "compute_fraction" if fp8 else "fp8_compute_fraction": f})
                scored.append((sum(e * e for e in log_errors(k, part)), f))
            part_loss, chosen[key] = min(scored)
            loss += part_loss
        k = base.model_copy(update={"layer_fixed_us": float(fixed), "read_fraction": read, **chosen})
        if best is None or loss < best[0]:
            best = (loss, k)
    assert best is not None
    return best[1]


def report(k: MoeKernel, rows: list[KernelRow]) -> None:
    errs = log_errors(k, rows)
    absolute = sorted(abs(math.expm1(e)) for e in errs)
    print(f"layer_fixed_us {k.layer_fixed_us:g}  read_fraction {k.read_fraction:g}  compute_fraction "
          f"{k.compute_fraction:g}  fp8_compute_fraction {k.fp8_compute_fraction:g}")
    print(f"{len(rows)} rows: median |error| {statistics.median(absolute):.1%}, 90th pct "
          f"{absolute[int(0.9 * len(absolute))]:.1%}, max {absolute[-1]:.1%}")
    worst = sorted(zip(errs, rows, strict=True), key=lambda x: -abs(x[0]))[:8]
    for e, r in worst:
        print(f"  {r.case:18s} M={r.tokens:5d} measured {r.measured_s * 1e6:8.1f} us  predicted "
              f"{r.measured_s * math.exp(e) * 1e6:8.1f} us ({math.expm1(e):+.0%})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="residuals of the constants in force, no fit")
    args = ap.parse_args()
    rows = kernel_rows()
    k = load_constants().engines["vllm"].moe_kernel
    assert k is not None
    report(k if args.check else fit(rows), rows)


if __name__ == "__main__":
    main()
