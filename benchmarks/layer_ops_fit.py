"""Fit performance.yaml's engines.vllm.layer_ops on the H200 timing of one dense layer's prefill kernels.

The timing (benchmarks/data/layer_ops_h200/dense_prefill_h200.csv, section A: Llama-3.1-8B / 70B at tp 1/2/4/8 and
Qwen2.5-0.5B at tp 1, M 128 - 16384 tokens of one prompt, 2026-12-04) gives, per layer and GPU, causal flash
attention (torch SDPA's FA2) and the elementwise ops (residual add + RMSNorm twice, SiLU-mul, RoPE; torch ops).
Each is predicted as the step model predicts it (performance.prefill_attention_s, elementwise_s: the catalog's H200
datasheet 4.8 TB/s and 989 TFLOPS) and the constants are grid-searched for the least mean squared log error on the
prefill-sized rows: attention's compute fraction and per-token time together (M >= 512), each elementwise op's read
fraction on its own rows (M >= 4096: the bandwidth-bound rate). No EX row (extra_calibration.csv) is used.
`python benchmarks/layer_ops_fit.py` prints the fit and its residuals; `--check` only the residuals of the constants
in force.
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
from infragen.sizing.constants import LayerOps, load_constants
from infragen.sizing.performance import elementwise_s, prefill_attention_s

DATA = Path(__file__).resolve().parent / "data" / "layer_ops_h200" / "dense_prefill_h200.csv"
GPU = "h200-141gb"
#: Prompt sizes the fit uses: attention from 512 tokens; the elementwise ops at their bandwidth-bound rate, from 4096
#: (below, the torch ops' several launches dominate: vLLM runs one fused kernel each, whose launch is the per-layer
#: overhead's part).
MIN_TOKENS = 512
ELEMENTWISE_MIN_TOKENS = 4096
#: Elementwise ops in the order of performance.elementwise_bytes_per_token, and the LayerOps fraction of each.
ELEMENTWISE = {"add_rmsnorm": "norm_read_fraction", "silu_mul": "activation_read_fraction",
               "rope": "rope_read_fraction"}


@dataclass(frozen=True)
class OpRow:
    case: str
    kind: str
    """'attention' or an elementwise op (add_rmsnorm, silu_mul, rope)."""
    tokens: int
    flops: float
    bytes: float
    measured_s: float


def op_rows(path: Path = DATA) -> list[OpRow]:
    """The attention and elementwise rows as timed (bytes: what the timing counted, reads and writes)."""
    out = []
    with open(path, encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            if r["error"] or not r["us"]:
                continue
            kind = "attention" if r["op"] == "attn_prefill" else r["op"]
            if kind == "attention" or kind in ELEMENTWISE:
                out.append(OpRow(r["case"], kind, int(r["M"]), float(r["flops"] or 0.0), float(r["bytes"]),
                                 float(r["us"]) * 1e-6))
    return out


@lru_cache(maxsize=1)
def _h200() -> tuple[float, float]:
    """Datasheet bandwidth (bytes/s) and 16-bit tensor peak (FLOP/s) of the catalog's H200."""
    acc = load_catalog().accelerator(GPU)
    return acc.memory_bandwidth_gb_per_s * 1e9, acc.bf16_tflops * 1e12


def predict(k: LayerOps, row: OpRow) -> float:
    bandwidth, peak = _h200()
    if row.kind == "attention":
        return prefill_attention_s(k, row.tokens, row.flops, peak)
    nbytes = tuple(row.bytes if op == row.kind else 0.0 for op in ELEMENTWISE)
    return elementwise_s(k, nbytes, bandwidth)  # type: ignore[arg-type]


def log_errors(k: LayerOps, rows: list[OpRow]) -> list[float]:
    return [math.log(predict(k, r) / r.measured_s) for r in rows]


def fitted_rows(rows: list[OpRow]) -> list[OpRow]:
    return [r for r in rows if r.tokens >= MIN_TOKENS]


def fit(rows: list[OpRow], base: LayerOps) -> LayerOps:
    """Grid search on the rows at >= MIN_TOKENS: attention compute fraction 0.20 - 0.80 by 0.01 with its per-token
    time 0 - 60 ns by 0.5; each elementwise op's read fraction 0.02 - 1.00 by 0.005 on its own rows."""
    rows = fitted_rows(rows)
    att = [r for r in rows if r.kind == "attention"]
    _, f, ns = min(
        (sum(e * e for e in log_errors(base.model_copy(update={"attention_compute_fraction": f / 100,
                                                                 "attention_row_ns": ns / 2}), att)), f / 100, ns / 2)
        for f, ns in itertools.product(range(20, 81), range(0, 121)))
    update: dict[str, float] = {"attention_compute_fraction": f, "attention_row_ns": ns}
    for op, key in ELEMENTWISE.items():
        part = [r for r in rows if r.kind == op and r.tokens >= ELEMENTWISE_MIN_TOKENS]
        update[key] = min((sum(e * e for e in log_errors(base.model_copy(update={key: x / 200}), part)), x / 200)
                          for x in range(4, 201))[1]
    return base.model_copy(update=update)


def report(k: LayerOps, rows: list[OpRow]) -> None:
    print(f"attention_compute_fraction {k.attention_compute_fraction:g}  attention_row_ns {k.attention_row_ns:g}  "
          f"norm / activation / rope read fractions {k.norm_read_fraction:g} / {k.activation_read_fraction:g} / "
          f"{k.rope_read_fraction:g}")
    for kind in ("attention", *ELEMENTWISE):
        part = [r for r in rows if r.kind == kind]
        errs = log_errors(k, part)
        low = MIN_TOKENS if kind == "attention" else ELEMENTWISE_MIN_TOKENS
        for label, sel in ((f">= {low} tokens (fitted)", lambda r, low=low: r.tokens >= low),
                           (f"< {low} tokens (not fitted)", lambda r, low=low: r.tokens < low)):
            es = sorted(abs(math.expm1(e)) for e, r in zip(errs, part, strict=True) if sel(r))
            if es:
                print(f"  {kind:<11} {label:<28} n={len(es):>3} median |error| {statistics.median(es):5.1%}, "
                      f"max {es[-1]:5.1%}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="residuals of the constants in force, no fit")
    args = ap.parse_args()
    rows = op_rows()
    k = load_constants().engines["vllm"].layer_ops
    if k is None:
        k = LayerOps(attention_compute_fraction=0.4, attention_row_ns=1.0, norm_read_fraction=0.5,
                     activation_read_fraction=0.3, rope_read_fraction=0.1, measured="-", fitted_on="-")
    report(k if args.check else fit(rows, k), rows)


if __name__ == "__main__":
    main()
