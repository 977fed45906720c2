"""Derive performance.yaml's engines.vllm.moe_layer_ops from the H200 layer-op timing.

A MoE decoder layer runs, besides its GEMMs, its attention and its experts, a 16-bit router GEMM and a handful of
small kernels that the step model did not price: fused residual-add + RMSNorm twice, two more norms (Qwen3-MoE's
per-head q/k norms, MLA's q_a / kv_a norms), RoPE, the KV-cache write, the top-k selection and the expert-sorting
moe_align_block_size (vLLM 0.34.0 qwen3_moe.py / deepseek_v2.py forward and fused_moe; eight kernels). At decode
sizes each is launch-bound, so its time is a per-kernel floor, not bytes; at prefill-sized steps the two add-norms'
traffic (read hidden and residual, write both, 16-bit: 8 x hidden bytes a token each) grows with the tokens. MLA
layers add the absorbed decode bmms with W_UK / W_UV.

Every constant is a median of measured rows (benchmarks/data/layer_ops_h200/moe_nonexpert_h200.csv and
benchmarks/data/moe_kernel_h200/block_fp8_dense_h200.csv, one H200, CUDA graphs); no EX row is read.
`python benchmarks/moe_layer_ops_fit.py` prints them and the constants in force.
"""
from __future__ import annotations

import csv
import statistics
from pathlib import Path

from infragen.catalog import load_catalog
from infragen.sizing.constants import load_constants

_DATA = Path(__file__).resolve().parent / "data"
LAYER_OPS = _DATA / "layer_ops_h200" / "moe_nonexpert_h200.csv"
BLOCK = _DATA / "moe_kernel_h200" / "block_fp8_dense_h200.csv"
GPU = "h200-141gb"
DECODE_TOKENS = 256   # router GEMM: decode steps (flat up to here: 5.9 - 9.5 us)
SMALL_TOKENS = 16     # single-kernel norms: launch-bound sizes
LARGE_TOKENS = 1817   # add + RMSNorm: bytes-bound sizes
BMM_TOKENS = 64
#: fused add-norm x 2, q/k (or q_a / kv_a) norm x 2, RoPE, KV-cache write, top-k, moe_align_block_size
KERNELS_PER_MOE_LAYER = 8
SINGLE_KERNEL_NORMS = ("qk_norm", "rmsnorm_q_a", "rmsnorm_kv_a")


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return [r for r in csv.DictReader(f) if not r.get("error")]


def derive() -> dict[str, float]:
    """The constants as medians of the timing (microseconds; the bandwidth as a fraction of the datasheet)."""
    ops = _rows(LAYER_OPS)
    block = _rows(BLOCK)
    router = [float(r["us"]) for r in ops if r["op"] == "router_gemm" and int(r["M"]) <= DECODE_TOKENS] + [
        float(r["gemm_us"]) for r in block if r["case"].endswith("router_gate") and int(r["M"]) <= DECODE_TOKENS]
    kernel = [float(r["us"]) for r in ops if r["op"] in SINGLE_KERNEL_NORMS and int(r["M"]) <= SMALL_TOKENS]
    bandwidth = load_catalog().accelerator(GPU).memory_bandwidth_gb_per_s
    assert bandwidth is not None
    norm = [float(r["gb_per_s"]) / bandwidth for r in ops if r["op"] == "add_rmsnorm" and int(r["M"]) >= LARGE_TOKENS]
    bmm = sum(statistics.median(float(r["gemm_us"]) for r in block if r["case"].endswith(name)
                                and int(r["M"]) <= BMM_TOKENS) for name in ("mla_uk_bmm", "mla_uv_bmm"))
    return {"router_us": statistics.median(router), "kernel_us": statistics.median(kernel),
            "norm_bandwidth_fraction": statistics.median(norm), "mla_absorb_bmm_us": bmm,
            "kernels_per_layer": float(KERNELS_PER_MOE_LAYER), "n_router": len(router), "n_kernel": len(kernel),
            "n_norm": len(norm)}


def main() -> None:
    d = derive()
    ops = load_constants().engines["vllm"].moe_layer_ops
    for key in ("router_us", "kernel_us", "norm_bandwidth_fraction", "mla_absorb_bmm_us", "kernels_per_layer"):
        print(f"{key:24s} derived {d[key]:8.4f}   in force {getattr(ops, key, None)}")
    print(f"rows: router {d['n_router']:.0f}, single-kernel norms {d['n_kernel']:.0f}, "
          f"add-norm bytes {d['n_norm']:.0f}")


if __name__ == "__main__":
    main()
