"""The H200 layer-op timing (benchmarks/data/layer_ops_h200) is complete and checked: every size of every
model / tp has all of a layer's ops, each timed as a CUDA graph, without error, and matching its float32
reference where one was taken. Models built on these files read them; a partial or failed run must not land."""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "layer_ops_h200"
DENSE_OPS = {("qkv", "bf16"), ("o", "bf16"), ("gate_up", "bf16"), ("down", "bf16"), ("qkv", "fp8"), ("o", "fp8"),
             ("gate_up", "fp8"), ("down", "fp8"), ("fp8_quant", "fp8"), ("attn_prefill", "bf16"),
             ("add_rmsnorm", "bf16"), ("silu_mul", "bf16"), ("rope", "bf16")}


def _rows(name: str) -> list[dict[str, str]]:
    with open(DATA / name, newline="") as f:
        return list(csv.DictReader(f))


def test_every_row_is_timed_and_checked() -> None:
    rows = _rows("dense_prefill_h200.csv") + _rows("moe_nonexpert_h200.csv")
    assert len(rows) == 1243
    assert all(r["timing"] == "graph" and not r["error"] and float(r["us"]) > 0 for r in rows)
    checked = [r for r in rows if r["rel_err"] and r["op"] not in ("fp8_quant", "mla_decode_sdpa")]
    assert len(checked) >= 100
    assert max(float(r["rel_err"]) for r in checked) < 1e-2  # bf16 / fp8 output rounding


def test_dense_prefill_has_a_whole_layer_at_every_size() -> None:
    ops: dict[tuple[str, int], set[tuple[str, str]]] = defaultdict(set)
    for r in _rows("dense_prefill_h200.csv"):
        ops[(r["case"], int(r["M"]))].add((r["op"], r["dtype"]))
    cases = {c for c, _ in ops}
    assert cases == {f"llama-3.1-{m}-tp{tp}" for m in ("8b", "70b") for tp in (1, 2, 4, 8)} | {"qwen2.5-0.5b-tp1"}
    assert {m for _, m in ops} == {128, 256, 512, 1024, 2048, 4096, 8192, 16384}
    assert all(v == DENSE_OPS for v in ops.values())
    assert len(ops) == 9 * 8
