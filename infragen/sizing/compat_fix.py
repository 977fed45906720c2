"""Exit 3 when compatibility rules refused candidates: how many each rule refused, and the workload changes that
satisfy them, labelled with the rules (explain.advise re-plans each change and keeps only those that work)."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from infragen.architecture import ModelArchitecture
from infragen.sizing import compat_gate
from infragen.spec import PREQUANTIZED_PRECISIONS, VLLM_PRECISIONS, WorkloadSpec

if TYPE_CHECKING:
    from infragen.sizing.search import SearchResult


def compat_rules_hit(spec: WorkloadSpec, model: ModelArchitecture, result: SearchResult) -> Counter[str]:
    """How many candidates each compat rule refused (re-derived from each candidate's own layout)."""
    hits: Counter[str] = Counter()
    for c in result.candidates:
        lay = c.sizing.layout
        rej = compat_gate.layout_rejection(spec, model, c.sizing.hardware, engine=lay.engine,
                                           precision=lay.precision, tp=lay.tp)
        if rej is not None and c.sizing.rejected == rej.reason:
            hits[rej.rule] += 1
    return hits


def rules_summary(hits: Counter[str]) -> str:
    """'Compatibility rules (...) refused N: rule (n), ...' for the exit-3 message; '' when none refused any."""
    if not hits:
        return ""
    return (f"Compatibility rules (docs/compat-rules.md) refused {sum(hits.values())}: "
            + ", ".join(f"{rule} ({n})" for rule, n in hits.most_common()) + ". ")


def compat_changes(spec: WorkloadSpec, hits: Counter[str]) -> list[tuple[str, dict[str, Any]]]:
    """(label naming the rules, workload update) for each change that satisfies a rule that refused candidates."""
    others = [p for p in ("fp8", "bf16", "fp16") if p not in spec.precision]
    held = spec.weights is not None and any(p in PREQUANTIZED_PRECISIONS and p in VLLM_PRECISIONS
                                            for p in spec.precision)  # the checkpoint decides: no other precision
    rules_for: dict[str, list[str]] = {}
    updates: dict[str, dict[str, Any]] = {}

    def add(rule: str, label: str, update: dict[str, Any]) -> None:
        rules = rules_for.setdefault(label, [])
        if rule not in rules:
            rules.append(rule)
        updates[label] = update

    families = spec.instance_families
    for rule, _ in hits.most_common():
        if rule == compat_gate.KV_KERNELS and spec.kv_cache_dtype == "fp8":
            add(rule, "kv_cache_dtype: auto", {"kv_cache_dtype": "auto"})
        if rule in (compat_gate.CHECKPOINT, compat_gate.WEIGHT_KERNELS) and not held:
            for p in others:
                precision = [*spec.precision, p]
                add(rule, f"precision: [{', '.join(precision)}]", {"precision": precision})
        if rule != compat_gate.ARCHITECTURE and (families.allow or families.deny):
            add(rule, "instance_families: {} (every family)",
                {"instance_families": families.model_copy(update={"allow": [], "deny": []})})
    return [(", ".join(f"{r} ({hits[r]} refused)" for r in rules_for[label]) + f": {label}", updates[label])
            for label in updates]
