"""Checks printed by accuracy.py beside its table: tensor-parallel scaling on the Lambda rows (vLLM 0.5.4, and the
independent vLLM >= 0.6 series), the independent rows by regime and tp with the issue's targets, and `--doc`
(rewrites a markdown file's report blocks)."""

from __future__ import annotations

import csv
import re
import statistics
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from calibration_rows import (  # benchmarks/ is not a package: accuracy.py puts its folder on sys.path
    _CURRENT_VLLM_METRICS,
    CURRENT_VLLM_REGIME,
    DATA,
    EXPERT_PARALLEL_REGIME,
    FITTED_REGIME,
    SHAREGPT_INPUT_TOKENS,
    SHAREGPT_OUTPUT_MEAN_TOKENS,
    SHAREGPT_REQUESTS,
    Outcome,
    _accelerator,
    _sharegpt_lengths,
    arch,
    gpu_of,
    is_current_vllm_check,
    model_of,
    precision_of,
    read_rows,
)

from infragen.catalog.records import Accelerator
from infragen.sizing.constants import load_constants
from infragen.sizing.estimate import estimate
from infragen.sizing.hardware import hardware_from_gpu
from infragen.sizing.memory import vllm_memory
from infragen.sizing.performance import gpu_figures, gpu_setup, simulate_drain

#: The issue's TP target: predicted tp-N / tp-lowest throughput ratios within this of the measured ratio.
TP_RATIO_TARGET = 0.20


def tp_ratio_report(outcomes: list[Outcome]) -> list[str]:
    """TP scaling check on the Lambda vLLM 0.5.4 rows (same model and GPU, 320 ShareGPT prompts, tp 1-8): measured
    throughput ratios to the lowest tp against the `vllm-0.5` replay (the release that ran), the current `vllm`
    profile replayed on the same drain with the same memory split ('drain'), and estimate()'s steady state of
    the current profile at 320 running requests ('estimate').

    'drain' is the like-for-like figure for the current profile: the step model is the only difference from the
    vllm-0.5 column. 'estimate' is what a user gets, but it answers another question: a steady state with no
    320-prompt tail, under current vLLM's memory split (an 8192-token profile pass and CUDA graphs inside the
    budget), which leaves Llama-3.1-70B FP8 at tp 1 a fraction of the KV cache vLLM 0.5.4 had (tp1 batch 6).
    These rows fed the fit of vllm-0.5's host overheads (not of the TP terms): a check of the scaling, not an
    independent accuracy figure.
    """
    pred = {o.row_id: o.predicted for o in outcomes if o.group == "vLLM Lambda ShareGPT"}
    series: dict[tuple[str, str], dict[int, tuple[float, float, float, float]]] = defaultdict(dict)
    for row in read_rows():
        if row["id"] not in pred or row["metric"] != "output_tokens_per_s":
            continue
        name, g, tp = model_of(row["model"]), gpu_of(row["hardware"]), int(row["tp"])
        if name is None or g is None:
            continue
        acc = _accelerator(*g)
        prec = precision_of(row["precision"], acc.id)
        est = estimate(arch(name), hardware_from_gpu(acc, tp), precision=prec,
                       tp=tp, input_len=SHAREGPT_INPUT_TOKENS, output_len=SHAREGPT_OUTPUT_MEAN_TOKENS,
                       concurrency=SHAREGPT_REQUESTS if est_fits(name, acc, row, tp) else None)
        series[(name, acc.id)][tp] = (float(row["value"]), pred[row["id"]] or 0.0,
                                      lambda_drain(name, acc, prec, tp, "vllm"), est.output_tokens_per_s)
    lines = ["", f"tensor-parallel scaling (Lambda vLLM 0.5.4 rows, throughput / throughput at the lowest tp; "
                 f"target: predicted ratio within {TP_RATIO_TARGET:.0%} of measured; measured vs vllm-0.5 replay "
                 "(error), then the current profile on the same drain and memory, and its estimate() steady state):"]
    errs: dict[str, list[float]] = defaultdict(list)
    for (name, gpu), by_tp in sorted(series.items()):
        tps = sorted(by_tp)
        if len(tps) < 2:
            continue
        m0, p0, d0, c0 = by_tp[tps[0]]
        parts = []
        for tp in tps[1:]:
            m, p, d, c = by_tp[tp]
            measured = m / m0
            e05, edrain, ecur = (p / p0) / measured - 1, (d / d0) / measured - 1, (c / c0) / measured - 1
            errs["vllm-0.5"].append(e05)
            errs["vllm drain"].append(edrain)
            errs["vllm estimate"].append(ecur)
            parts.append(f"tp{tp}/tp{tps[0]} {measured:.2f} vs {p / p0:.2f} ({e05:+.0%}; drain {d / d0:.2f}, "
                         f"estimate {c / c0:.2f})")
        lines.append(f"  {name:<20} {gpu:<14} " + ", ".join(parts))
    for profile, es in errs.items():
        inside = sum(abs(e) <= TP_RATIO_TARGET for e in es)
        lines.append(f"  {profile:<13} ratios within {TP_RATIO_TARGET:.0%}: {inside} of {len(es)}, median|err| "
                     f"{statistics.median(abs(e) for e in es):.1%}, bias {statistics.median(es):+.1%}")
    return lines


_TP_SERIES = re.compile(r"\[tp series: ([\w.-]+)\]")


def tp_series_report(outcomes: list[Outcome]) -> list[str]:
    """TP scaling on independent vLLM >= 0.6 rows: the rows a '[tp series: NAME]' tag groups (one harness, one
    model and weight type, the same GPU at several tp), each predicted as the burst it ran (accuracy.py
    _current_vllm_row, per-request lengths) or, for TPOT rows, at its batch (a series per batch, speed = 1 / TPOT);
    measured and predicted speed ratios to the lowest tp, against the issue's 20 % target. Each row is predicted
    with the profile of how its vLLM ran (accuracy.release_profile); a series whose rows a fit used (FITTED_REGIME)
    is shown marked and left out of the tally."""
    pred = {o.row_id: (o.measured, o.predicted) for o in outcomes if o.predicted is not None}
    fitted = {o.row_id for o in outcomes if o.regime == FITTED_REGIME}
    series: dict[tuple[str, str, str], dict[int, tuple[float, float]]] = defaultdict(dict)
    fitted_series: set[tuple[str, str, str]] = set()
    for row in read_rows():
        tag = _TP_SERIES.search(row["notes"])
        if tag is None or row["id"] not in pred or row["metric"] not in ("output_tokens_per_s", "tpot_ms"):
            continue
        g = gpu_of(row["hardware"])
        label = row["model"] if row["metric"] == "output_tokens_per_s" else f"{row['model']} batch {row['concurrency']}"
        key = (tag[1], label, g[0] if g else row["hardware"])
        measured, predicted = pred[row["id"]]
        if row["metric"] == "tpot_ms":  # a step's speed: tokens a second per sequence
            measured, predicted = 1e3 / measured, 1e3 / predicted
        series[key][int(row["tp"] or 1)] = (measured, predicted)
        if row["id"] in fitted:
            fitted_series.add(key)
    if not series:
        return []
    lines = ["", f"tensor-parallel scaling on vLLM >= 0.6 rows (throughput, or 1 / TPOT at a batch, over the same at "
                 f"the lowest tp; measured vs predicted with the row's engine profile: vllm-0.6 for V0 multi-step, "
                 f"vllm-0.5 for V0 single-step, vllm for V1; series a fit used are marked and not counted; target: "
                 f"within {TP_RATIO_TARGET:.0%}):"]
    errs: dict[str, list[float]] = defaultdict(list)
    for (name, model, gpu), by_tp in sorted(series.items()):
        tps = sorted(by_tp)
        if len(tps) < 2:
            continue
        m0, p0 = by_tp[tps[0]]
        parts = []
        was_fitted = (name, model, gpu) in fitted_series
        for tp in tps[1:]:
            m, p = by_tp[tp]
            err = (p / p0) / (m / m0) - 1
            if not was_fitted:
                errs[name].append(err)
            parts.append(f"tp{tp}/tp{tps[0]} {m / m0:.2f} vs {p / p0:.2f} ({err:+.0%})")
        lines.append(f"  {model[:34]:<34} {gpu[:24]:<24} " + ", ".join(parts) + (" (fitted)" if was_fitted else ""))
    for name, es in sorted(errs.items()):
        inside = sum(abs(e) <= TP_RATIO_TARGET for e in es)
        lines.append(f"  {name}: ratios within {TP_RATIO_TARGET:.0%}: {inside} of {len(es)}, median|err| "
                     f"{statistics.median(abs(e) for e in es):.1%}, bias {statistics.median(es):+.1%}; target "
                     f"{'met' if inside == len(es) else 'not met'}")
    return lines


def lambda_drain(name: str, acc: Accelerator, precision: str, tp: int, engine: str) -> float:
    """Output tok/s of the Lambda 320-prompt drain replayed with `engine`'s constants and the memory split
    accuracy.py gives the vLLM 0.5.4 rows (utilisation 0.9, a 2048-token profile pass, CUDA graphs outside)."""
    model = arch(name)
    mem = vllm_memory(model, hardware_from_gpu(acc, tp).memory_per_gpu_gib, precision, "bf16", tp, 1, 0.9,
                      profile_tokens=2048, count_cuda_graphs=False)
    if mem.capacity_tokens <= 0:
        return 0.0
    setup = gpu_setup(model, gpu_figures(acc), precision, mem.kv_bytes_per_token_gpu, engine, tp, 1, 1)
    ins, outs = _sharegpt_lengths()
    return simulate_drain(setup, ins, outs, 256, mem.capacity_tokens).output_tokens_per_s


def est_fits(name: str, acc: Accelerator, row: dict[str, str], tp: int) -> bool:
    """Whether 320 concurrent ShareGPT requests fit the KV cache (else estimate's max-load batch is used)."""
    est = estimate(arch(name), hardware_from_gpu(acc, tp), precision=precision_of(row["precision"], acc.id), tp=tp,
                   input_len=SHAREGPT_INPUT_TOKENS, output_len=SHAREGPT_OUTPUT_MEAN_TOKENS, concurrency=None)
    return est.fits and est.concurrency >= SHAREGPT_REQUESTS


#: cuBLAS GEMMs of one decoder layer timed on one H200 (benchmarks/data/moe_kernel_h200/README.md).
DENSE_GEMMS = DATA / "moe_kernel_h200" / "dense_gemm_h200.csv"


def dense_gemm_report(engine: str = "vllm") -> list[str]:
    """The step model's linear-layer time per decoder layer against cuBLAS measured on one H200 (qkv, o, gate_up,
    down of Llama-3.1 8B / 70B per GPU at tp 1-8, M = 1-256 tokens, bf16 and fp8, replayed in a CUDA graph):
    `engine`'s linear_kernel (4 x fixed + max(bytes / (bandwidth x read), FLOPs / (peak x fraction))), else its
    roofline max(2 x params x M / (peak x f_compute), bytes / (bandwidth x f_weights)), the catalog's H200 figures.
    Per-layer host/launch overheads are left out (a graph replay has none). engines.vllm.linear_kernel is fitted
    on these rows (benchmarks/dense_gemm_fit.py), so for `vllm` this is a fit check, not an independent one."""
    if not DENSE_GEMMS.exists():
        return []
    from dense_gemm_fit import GEMMS_PER_ROW

    from infragen.sizing.performance import linear_layers_s

    e = load_constants().engines[engine]
    acc = _accelerator("h200", "")
    bandwidth = (acc.memory_bandwidth_gb_per_s or 0.0) * 1e9
    with open(DENSE_GEMMS, encoding="utf-8") as fh:
        rows = [r for r in csv.DictReader(fh) if not r["error"] and r["layer_us"]]
    by: dict[tuple[str, str, int], dict[int, tuple[float, float]]] = defaultdict(dict)
    errs: dict[int, list[float]] = defaultdict(list)
    for r in rows:
        fp8 = r["dtype"] == "fp8"
        peak = ((acc.fp8_tflops if fp8 else acc.bf16_tflops) or 0.0) * 1e12
        weights = float(r["bytes_touched"])
        flops = 2.0 * weights / (1.0 if fp8 else 2.0) * int(r["M"])
        if e.linear_kernel is not None:
            model_us = linear_layers_s(e.linear_kernel, GEMMS_PER_ROW, weights, flops, bandwidth, peak, fp8) * 1e6
        else:
            model_us = max(flops / (peak * e.prefill_compute_fraction),
                           weights / (bandwidth * e.decode_bandwidth_fraction)) * 1e6
        measured = float(r["layer_us"])
        by[(r["model"], r["dtype"], int(r["M"]))][int(r["tp"])] = (measured, model_us)
        errs[int(r["tp"])].append(model_us / measured - 1.0)
    kind = "linear_kernel (fitted on these rows)" if e.linear_kernel is not None else "linear-layer roofline"
    lines = ["", f"dense GEMMs of one layer on one H200 (cuBLAS, CUDA graph; {DENSE_GEMMS.parent.name}/"
                 f"{DENSE_GEMMS.name}) against the `{engine}` step model's {kind}, us:"]
    for (model, dtype, m), by_tp in sorted(by.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2])):
        if m not in (1, 256) or 1 not in by_tp or 8 not in by_tp:
            continue
        parts = [f"tp{tp} {mu:6.1f} vs {pu:6.1f} ({pu / mu - 1:+.0%})" for tp, (mu, pu) in sorted(by_tp.items())]
        (m1, p1), (m8, p8) = by_tp[1], by_tp[8]
        lines.append(f"  {model:<9} {dtype:<4} M={m:<3} " + ", ".join(parts)
                     + f"; tp1/tp8 measured {m1 / m8:.2f}, model {p1 / p8:.2f}")
    for tp, es in sorted(errs.items()):
        lines.append(f"  tp {tp}: n={len(es):>2} median error {statistics.median(es):+.1%} "
                     "(model / measured - 1, all M)")
    return lines


#: The issue's targets on rows no fit used (median absolute error), by metric and regime.
TARGETS = {("dense", "output_tokens_per_s"): 0.15, ("dense", "tpot_ms"): 0.15, ("dense", "ttft_ms"): 0.25,
           ("MoE (few experts)", "output_tokens_per_s"): 0.30, ("many-expert MoE", "output_tokens_per_s"): 0.30}


def moe_class(o: Outcome) -> str:
    """dense / MoE (few experts) / many-expert MoE, from the regime check_regime gave an independent row."""
    if o.regime == EXPERT_PARALLEL_REGIME:
        return "expert parallel"
    if "mixtral-style" in o.regime:
        return "MoE (few experts)"
    return "many-expert MoE" if "moe" in o.regime else "dense"


def regime_split_report(outcomes: list[Outcome]) -> list[str]:
    """The independent vLLM >= 0.6 rows split by regime (dense / MoE with few experts / many-expert) and by tp,
    with the issue's targets beside what is reached. The tp lines keep dense and MoE rows apart: almost every
    independent tp > 1 row is a many-expert MoE one, so a pooled tp figure would show the MoE error as a TP one."""
    rows = [o for o in outcomes if o.regime.startswith(CURRENT_VLLM_REGIME)]
    if not rows:
        return []
    tps = {r["id"]: int(r["tp"] or 1) for r in read_rows()}
    lines = ["", "independent rows (vLLM >= 0.6, never fitted) by regime and tp; target = the issue's:"]
    keys: dict[tuple[str, str], list[float]] = defaultdict(list)
    for o in rows:
        keys[(moe_class(o), o.metric)].append(o.error)
        kind = "dense" if moe_class(o) == "dense" else "MoE"
        keys[(f"tp {tps[o.row_id]} {kind}", o.metric)].append(o.error)
    order = ["dense", "MoE (few experts)", "many-expert MoE"]
    order += [f"tp {tp} {kind}" for tp in (1, 2, 4, 8) for kind in ("dense", "MoE")]
    for regime in order:
        for metric in _CURRENT_VLLM_METRICS:
            errs = keys.get((regime, metric), [])
            target = TARGETS.get((regime, metric))
            goal = f"target <= {target:.0%}" if target is not None else ""
            if not errs:
                if target is not None:
                    lines.append(f"  {regime:<18} {metric:<20} n= 0  (no independent row)  {goal}")
                continue
            med = statistics.median(abs(e) for e in errs)
            met = "" if target is None else ("  met" if med <= target else "  not met")
            lines.append(f"  {regime:<18} {metric:<20} n={len(errs):>2}  median|err| {med:6.1%}  bias "
                         f"{statistics.median(errs):+6.1%}  {goal}{met}".rstrip())
    return lines


def update_doc(path: Path, report: str) -> None:
    """Replace each fenced block of `path` whose first line starts a blank-line-separated section of `report`."""
    sections = {}
    for chunk in report.strip("\n").split("\n\n"):
        lines = chunk.strip("\n").split("\n")
        sections[lines[0].strip()] = "\n".join(lines)
    text = path.read_text(encoding="utf-8")

    def swap(m: re.Match[str]) -> str:
        first = m[2].split("\n", 1)[0].strip()
        return f"```\n{sections[first]}\n```" if not m[1] and first in sections else m[0]

    fenced = re.compile(r"^```([^\n]*)\n(.*?)\n```$", flags=re.S | re.M)
    path.write_text(fenced.sub(swap, text), encoding="utf-8")


def moe_kernel_report() -> list[str]:
    """How well engines.vllm.moe_kernel reproduces the H200 timing it was fitted on, per expert shape (a fit
    check, not an independent one: benchmarks/moe_kernel_fit.py fits on the same rows)."""
    import math

    from moe_kernel_fit import kernel_rows, log_errors

    from infragen.sizing.performance import engine_constants

    k = engine_constants("vllm").moe_kernel
    if k is None:
        return []
    rows = kernel_rows()
    errs = log_errors(k, rows)
    by: dict[str, list[float]] = defaultdict(list)
    for row, e in zip(rows, errs, strict=True):
        by[row.case].append(math.expm1(e))
    absolute = sorted(abs(math.expm1(e)) for e in errs)
    lines = ["", "fused-MoE kernel timing (vLLM 0.34.0 on one H200, benchmarks/data/moe_kernel_h200; "
             "engines.vllm.moe_kernel is fitted on it):",
             f"  all shapes           n={len(rows):>3}  median|err| {statistics.median(absolute):5.1%}  "
             f"worst {max(absolute):5.1%}"]
    for case, shape_errs in sorted(by.items()):
        worst = max(shape_errs, key=abs)
        lines.append(f"  {case:<20} n={len(shape_errs):>3}  median|err| "
                     f"{statistics.median(abs(x) for x in shape_errs):5.1%}  worst {worst:+6.1%}")
    return lines


def expert_parallel_report(outcomes: list[Outcome]) -> list[str]:
    """The expert-parallel rows (vllm serve --enable-expert-parallel; never fitted) beside their tp twins (the same
    page's run of the same checkpoint on the same GPUs without EP, named in the row's notes): each prediction, and
    the EP / tp throughput ratio predicted against measured."""
    ep = [o for o in outcomes if o.regime == EXPERT_PARALLEL_REGIME]
    if not ep:
        return []
    by_id = {o.row_id: o for o in outcomes}
    notes = {r["id"]: r["notes"] for r in read_rows()}
    tps = {r["id"]: r["tp"] for r in read_rows()}
    lines = ["", "expert parallelism (vLLM >= 0.6 rows served with --enable-expert-parallel, never fitted) and "
             "their tp twins:"]
    for o in ep:
        twin_id = re.search(r"tp twin[^:]*: (EX\d{4})", notes[o.row_id])
        twin = by_id.get(twin_id[1]) if twin_id else None
        lines.append(f"  {o.row_id} tp {tps[o.row_id]} EP {o.metric:<20} measured {o.measured:>8.2f} predicted "
                     f"{o.predicted:>8.2f} ({o.error:+.1%}) {o.note}")
        if twin is None or twin.predicted is None or o.predicted is None:
            lines.append("         no tp twin of the same checkpoint at this tp")
            continue
        lines.append(f"  {twin.row_id} tp {tps[twin.row_id]}    {twin.metric:<20} measured {twin.measured:>8.2f} "
                     f"predicted {twin.predicted:>8.2f} ({twin.error:+.1%})")
        lines.append(f"         EP / tp: measured {o.measured / twin.measured:.3f}, predicted "
                     f"{o.predicted / twin.predicted:.3f}")
    return lines


def kv_sweep_report(evaluate: Callable[[dict[str, str]], Outcome | str], fractions: list[float],
                    ids: tuple[str, str] | None = None) -> list[str]:
    """The independent vLLM >= 0.6 rows (those from ids[0] to ids[1] when given) at each engines.vllm.
    kv_bandwidth_fraction, overridden in-process (closed_loop_check.kv_bandwidth_fraction; performance.yaml is not
    changed): predicted / measured - 1 as accuracy.py predicts the row (`evaluate`: accuracy.evaluate_row)."""
    from closed_loop_check import kv_bandwidth_fraction  # benchmarks/ module; imports the online-rate rows

    rows = [r for r in read_rows() if is_current_vllm_check(r) and (ids is None or ids[0] <= r["id"] <= ids[1])]
    cells: dict[str, list[str]] = {r["id"]: [] for r in rows}
    labels: dict[str, str] = {}
    for f in fractions:
        with kv_bandwidth_fraction(f):
            for r in rows:
                o = evaluate(r)
                if isinstance(o, str):
                    cells[r["id"]].append("-")
                    labels.setdefault(r["id"], f"{r['id']} {r['metric']} (unusable)")
                    continue
                labels.setdefault(r["id"], f"{r['id']} {r['metric']} {' '.join(o.note.split()[:3])}, "
                                           f"{r['input_len']} + {r['output_len']}")
                cells[r["id"]].append(f"{o.error:+.0%}")
    head = "| row (predicted / measured - 1, as accuracy.py predicts it) | " + " | ".join(
        f"{f:g}" for f in fractions) + " |"
    return [head, "|---" * (len(fractions) + 1) + "|",
            *(f"| {labels[rid]} | " + " | ".join(v) + " |" for rid, v in cells.items())]
