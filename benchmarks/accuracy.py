"""Accuracy of infragen's memory and performance model on the calibration rows (benchmarks/data/).

Prints, per source and per metric: count, median absolute percentage error, bias and the worst rows; then the
TensorRT-LLM ceiling check, the per-regime error bands, and the checks of accuracy_checks.py (TP scaling, the
independent rows by regime and tp), burst_ttft_check.py (the 0.6.0 bursts' median TTFT against their replays:
the Mixtral runs' pause), llama_bench_check.py, calibrate_check.py (calibrate on one result, predict
the others of its hardware), online_rate_check.py (published runs at a request rate, reported apart) and
closed_loop_check.py (published runs at --max-concurrency, reported apart, by GPU).
`--fit` searches the engine constants (prints YAML); `--doc FILE` rewrites FILE's report blocks; `--kv-sweep F,...
[--ids FIRST-LAST]` prints the independent vLLM >= 0.6 rows at each kv_bandwidth_fraction (accuracy_checks.
kv_sweep_report). Rows and their label mapping: calibration_rows.py.
Run: python benchmarks/accuracy.py [--fit] [--rows] [--doc docs/performance-model.md] [--kv-sweep 0.4083,0.6]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import re
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

import yaml

from infragen.architecture import ModelArchitecture
from infragen.catalog.records import Accelerator, CpuModel
from infragen.sizing import constants as constants_mod
from infragen.sizing.cpu_performance import cpu_setup, generation_step_s, prompt_s
from infragen.sizing.drain import BurstReplay, burst_drain
from infragen.sizing.estimate import estimate
from infragen.sizing.hardware import hardware_from_gpu
from infragen.sizing.memory import (
    gguf_weight_bytes,
    param_groups,
    vllm_memory,
    weight_bytes_per_gpu,
)
from infragen.sizing.performance import (
    MANY_EXPERT_MOE_REGIME,
    gpu_figures,
    gpu_setup,
    is_many_expert_moe,
    simulate_drain,
    steady_state,
    token_step_s,
)
from infragen.sizing.types import Estimate, Hardware
from infragen.units import GIB

sys.path.insert(0, str(Path(__file__).resolve().parent))
from accuracy_checks import (  # noqa: F401
    TARGETS,
    dense_gemm_report,
    expert_parallel_report,
    kv_sweep_report,
    moe_class,
    moe_kernel_report,
    regime_split_report,
    tp_ratio_report,
    tp_series_report,
    update_doc,
)
from calibration_rows import (  # noqa: F401  (re-exported: tests use accuracy.<name>)
    _ARCH,
    _CURRENT_VLLM_METRICS,
    CURRENT_VLLM_GROUP,
    CURRENT_VLLM_REGIME,
    DATA,
    EXPERT_PARALLEL_GROUP,
    EXPERT_PARALLEL_REGIME,
    FITTED_GROUP,
    FITTED_REGIME,
    SHAREGPT_INPUT_TOKENS,
    SHAREGPT_OUTPUT_MEAN_TOKENS,
    SHAREGPT_REQUESTS,
    V0_MAX_NUM_SEQS,
    V0_MIN_BATCHED_TOKENS,
    Burst,
    Outcome,
    _accelerator,
    _sharegpt_lengths,
    arch,
    burst_lengths,
    burst_of,
    gpu_of,
    is_current_vllm_check,
    is_expert_parallel_check,
    is_fitted_vllm_row,
    model_of,
    precision_of,
    read_rows,
)
from llama_bench_check import bench_rows, fit_measured_fraction  # benchmarks/ is not a package
from llama_bench_check import report as llama_bench_report
from llama_bench_check import target_lines as llama_target_lines

#: Regimes with fewer rows than this get at least SMALL_SAMPLE_BAND (a percentile of 2 rows is not a band).
MIN_BAND_ROWS = 10
SMALL_SAMPLE_BAND = 0.3
#: trtllm-bench's largest runtime batch (assumption; the KV cache usually limits first).
TRTLLM_MAX_BATCH = 2048


def evaluate_row(row: dict[str, str]) -> Outcome | str:
    """Predict one row; a string is the reason the row is unusable."""
    metric, rid = row["metric"], row["id"]
    measured = float(row["value"])
    name = model_of(row["model"])
    if name is None:
        return f"{rid}: model {row['model']!r} not modelled"
    model = arch(name)
    engine = row["engine"]
    if engine in ("llama.cpp", "ik_llama.cpp"):
        return _cpu_row(row, model, measured)
    tp = int(row["tp"] or 1)
    pp = int(row["pp"] or 1)
    prec = precision_of(row["precision"], "")
    if metric == "weights_GiB_per_gpu":  # depends on the checkpoint and the layout only
        scope = "mlp" if "meta official fp8" in row["precision"].lower() else "all-linear"
        pred = weight_bytes_per_gpu(model, prec, tp, pp, scope) / GIB
        return Outcome(rid, f"{engine} weights", metric, measured, pred, "memory-weights",
                       "Meta FP8: MLP-only quantization" if scope == "mlp" else "")
    g = gpu_of(row["hardware"])
    if g is None:
        return f"{rid}: hardware {row['hardware']!r} has no sourced figures"
    acc = _accelerator(*g)
    hw = hardware_from_gpu(acc, tp * pp)
    if is_current_vllm_check(row) or is_expert_parallel_check(row) or is_fitted_vllm_row(row):
        with engine_profile(release_profile(row)):
            return _current_vllm_row(row, model, acc, hw, measured)
    if metric in ("kv_cache_gpu_blocks", "kv_cache_tokens"):  # V0 '# GPU blocks' / V1 'GPU KV cache size: N tokens'
        util = float(row["concurrency"].split("--gpu-memory-utilization")[1].split()[0].rstrip(";),"))
        mem = vllm_memory(model, hw.memory_per_gpu_gib, prec, "bf16", tp, pp, util)
        pred = mem.capacity_tokens if metric == "kv_cache_tokens" else mem.num_blocks
        return Outcome(rid, f"{engine} KV cache", metric, measured, float(pred), "memory-kv",
                       f"utilisation {util}")
    trt = engine == "TensorRT-LLM"
    # trtllm-bench's FP8 builds quantize the KV cache to FP8 too (assumption stated in the docs).
    kv_dtype = "fp8" if (trt and prec == "fp8") else "fp16" if prec == "fp16" else "bf16"
    if trt:
        # TensorRT-LLM gives the KV cache 90 % of the memory left after weights and activations.
        whole = vllm_memory(model, hw.memory_per_gpu_gib, prec, kv_dtype, tp, pp, 1.0)
        capacity = int(0.9 * whole.kv_budget_bytes / whole.kv_bytes_per_token_gpu)
        mem = whole
    else:
        # vLLM 0.5.4 (Lambda): max_model_len 2048 assumed, no chunked prefill, so the profile batch is 2048
        # tokens, and CUDA graphs were captured after the KV cache was sized (outside the budget).
        mem = vllm_memory(model, hw.memory_per_gpu_gib, prec, kv_dtype, tp, pp, 0.9, profile_tokens=2048,
                          count_cuda_graphs=False)
        capacity = mem.capacity_tokens
    if capacity <= 0:
        return f"{rid}: model does not fit (weights {mem.weights_bytes / GIB:.1f} GiB per GPU)"
    eng = "tensorrt-llm" if trt else "vllm-0.5"  # the Lambda rows ran vLLM 0.5.4
    setup = gpu_setup(model, gpu_figures(acc), prec, mem.kv_bytes_per_token_gpu, eng, tp, pp, 1)
    conc_text = row["concurrency"].lower()
    if engine == "vLLM":
        ins, outs = _sharegpt_lengths()
        res = simulate_drain(setup, ins, outs, 256, capacity)
        # Regime of the bulk of the run: steady state at half the 256-sequence cap.
        bound = steady_state(setup, SHAREGPT_INPUT_TOKENS, SHAREGPT_OUTPUT_MEAN_TOKENS, 128).compute_bound
        regime = "gpu-decode-compute-bound" if bound else "gpu-decode-memory-bound"
        regime = MANY_EXPERT_MOE_REGIME if is_many_expert_moe(model) else regime
        if metric == "output_tokens_per_s":
            return Outcome(rid, "vLLM Lambda ShareGPT", metric, measured, res.output_tokens_per_s, regime)
        return Outcome(rid, "vLLM Lambda ShareGPT", metric, measured, res.mean_itl_s * 1e3, regime,
                       "compared with token-weighted mean ITL")
    inp, out = int(row["input_len"]), int(row["output_len"])
    if metric == "TTFT_ms":
        t = token_step_s(setup, 0.0, 0.0, float(inp), inp / 2.0)
        return Outcome(rid, "TRT-LLM TTFT batch 1", metric, measured, t * 1e3, "gpu-prefill")
    # v0.6.1 A100 rows at TP>1 print 'out tok/s' without saying per GPU; the H100 table of the same doc says
    # per GPU, so these are read as per GPU too (the note column flags the ambiguity).
    per_gpu = metric.endswith("_per_gpu") or "ambiguous total vs per-gpu" in row["notes"].lower()
    if "static batch" in conc_text:
        batch = int(conc_text.split("static batch size")[1].split()[0])
        t_prefill = token_step_s(setup, 0.0, 0.0, float(batch * inp), inp / 2.0)
        t_decode = (out - 1) * token_step_s(setup, batch, inp + out / 2.0, 0.0, 0.0)
        pred = batch * out / (t_prefill + t_decode)
        group = "TRT-LLM static batch"
    else:
        batch = min(TRTLLM_MAX_BATCH, capacity // (inp + out))
        if batch < 1:
            return f"{rid}: not one sequence fits"
        pred = steady_state(setup, inp, out, batch).output_tokens_per_s
        group = "TRT-LLM saturation"
    if per_gpu:
        pred /= tp * pp
    regime = "gpu-decode-compute-bound" if steady_state(setup, inp, out, batch).compute_bound else \
        "gpu-decode-memory-bound"
    regime = MANY_EXPERT_MOE_REGIME if is_many_expert_moe(model) else regime
    return Outcome(rid, group, metric, measured, pred, regime, f"batch {batch}")


def check_regime(model: ModelArchitecture, acc: Accelerator, precision: str, kv_dtype: str) -> str:
    """Regime label of a check row: '' for dense BF16/FP16 (EX0009-EX0024), else e.g. 'MoE fp8', 'int4'."""
    parts = []
    if is_many_expert_moe(model):  # 'moe' in the label puts the row in the many-expert band (bands())
        parts.append("MLA MoE" if model.kv_lora_rank else "MoE")
    elif model.num_experts:
        parts.append("Mixtral-style experts")
    if precision.startswith("int4"):
        parts.append("int4")
    elif precision == "fp8":
        parts.append("fp8" if acc.fp8_tflops is not None else "fp8 weight-only Marlin")
    if kv_dtype == "fp8":
        parts.append("fp8 KV")
    return " ".join(parts)


def _current_vllm_row(row: dict[str, str], model: ModelArchitecture, acc: Accelerator, hw: Hardware,
                      measured: float, factors: tuple[float, float] = (1.0, 1.0)) -> Outcome | str:
    """estimate() for one vLLM >= 0.6 row; server settings from 'gpu_memory_utilization=X max_model_len=N' and
    'kv_cache_dtype=fp8' in notes (no kv_cache_dtype: vLLM's auto, the checkpoint dtype).

    Rows tagged '[check: prefix-cached]' ran with the prompts already in vLLM's prefix cache (~400 of 401 tokens):
    they are predicted with prefix_cache_hit_rate 1 (every full block cached, the last token recomputed) and their
    note carries the prediction without that credit.
    Quantized, MoE and fp8-KV rows get their own group and regime (check_regime), so the dense BF16 figures and
    the check-vllm-current band stay what they were. `factors`: a calibration's (generation, prompt) speed factors
    (calibrate_check.py), as `estimate --calibration` applies them.
    """
    rid, metric, notes = row["id"], row["metric"], row["notes"]
    tp, pp = int(row["tp"] or 1), int(row["pp"] or 1)
    conc_text = row["concurrency"].strip().lower()
    conc = None if conc_text.startswith("max-load") else int(conc_text)
    server = dict(re.findall(r"\b(gpu_memory_utilization|max_model_len)=(\d+(?:\.\d+)?)", notes))
    util = float(server.get("gpu_memory_utilization", 0.9))
    mml = int(server["max_model_len"]) if "max_model_len" in server else None
    kv = re.search(r"\bkv_cache_dtype=(fp8|bf16|fp16|auto)\b", notes)
    prec = precision_of(row["precision"], acc.id)
    inp, out = int(row["input_len"]), int(row["output_len"])
    tag = re.search(r"\[check: ([^\]]+)\]", notes)
    cached = bool(tag and tag[1] == "prefix-cached")
    ep = is_expert_parallel_check(row)

    def run(hit_rate: float) -> Estimate:
        return estimate(model, hw, precision=prec, kv_cache_dtype=kv[1] if kv else "auto", tp=tp, pp=pp,
                        input_len=inp, output_len=out, concurrency=conc, max_model_len=mml,
                        gpu_memory_utilization=util, prefix_cache_hit_rate=hit_rate, decode_factor=factors[0],
                        prefill_factor=factors[1], expert_parallel=ep)

    def figure(e: Estimate) -> float:
        return {"output_tokens_per_s": e.output_tokens_per_s, "ttft_ms": e.ttft_ms, "tpot_ms": e.tpot_ms}[metric]

    est = run(1.0 if cached else 0.0)
    if not est.fits:
        return f"{rid}: {est.reason}"
    pred = figure(est)
    burst = burst_of(row) if metric == "output_tokens_per_s" else None
    label = check_regime(model, acc, prec, est.kv_cache_dtype)
    inner = ", ".join(x for x in (label, tag[1] if tag else "") if x)
    group = f"{CURRENT_VLLM_GROUP}, {inner})" if inner else f"{CURRENT_VLLM_GROUP})"
    regime = f"{CURRENT_VLLM_REGIME}-{label.lower().replace(' ', '-')}" if label else CURRENT_VLLM_REGIME
    if ep:  # reported apart, beside its tp twin (accuracy_checks.expert_parallel_report)
        group, regime = f"{EXPERT_PARALLEL_GROUP[:-1]}, {inner})", EXPERT_PARALLEL_REGIME
    if is_fitted_vllm_row(row):  # a fit used it: reported apart, in no independent tally
        group, regime = FITTED_GROUP, FITTED_REGIME
    note = f"{acc.id} batch {est.concurrency} ({est.regime})"
    if burst is not None:
        steady = pred
        pred, limits = burst_drain_tokens_per_s(row, burst, model, acc, hw, prec, est, mml, util, ep, factors)
        run = (f"closed loop of {burst.requests} {burst.dataset} requests replayed" if burst.clients else
               f"burst of {burst.requests} {burst.dataset} requests drained")
        note = (f"{acc.id} {run} ({limits}; {est.regime}); steady state at batch {est.concurrency} {steady:.2f} "
                f"({steady / measured - 1:+.0%})")
    if cached:
        cold = figure(run(0.0))
        note += f"; without the prefix-cache credit {cold:.2f} ({cold / measured - 1:+.0%})"
    return Outcome(rid, group, metric, measured, pred, regime, note)


def burst_drain_tokens_per_s(row: dict[str, str], burst: Burst, model: ModelArchitecture, acc: Accelerator,
                             hw: Hardware, prec: str, est: Estimate, mml: int | None, util: float, ep: bool,
                             factors: tuple[float, float]) -> tuple[float, str]:
    """Output tok/s of a burst row replayed as what it measured: every request queued at once and drained
    (sizing/drain.burst_drain) under the server's scheduler limits; and the limits used. vLLM >= 0.8 (V1): the
    pinned vLLM's per-GPU defaults (taken to hold for the row's release); older: V0's 256 sequences and
    max(max_model_len, 2048) tokens; the row's --max-num-batched-tokens where its command line set it."""
    version = re.match(r"\s*(\d+)\.(\d+)", row["engine_version"])
    v1 = version is not None and (int(version[1]), int(version[2])) >= (0, 8)
    seqs = None if v1 else V0_MAX_NUM_SEQS
    budget = None if v1 else max(mml or model.max_position_embeddings, V0_MIN_BATCHED_TOKENS)
    budget = burst.max_num_batched_tokens or budget
    # the schedule does not depend on the factors: replay once, rescale (calibrate_check); the engine's constants
    # are in the key because --kv-sweep changes them in-process
    key = (row["id"], row["notes"], est.kv_cache_capacity_tokens, constants_mod.load_constants().engines["vllm"])
    if key not in _DRAINS:
        ins, outs = burst_lengths(burst, int(row["input_len"]), int(row["output_len"]))
        _DRAINS[key] = burst_drain(model, hw, precision=prec, tp=int(row["tp"] or 1), pp=int(row["pp"] or 1),
                                   input_lens=ins, output_lens=outs, kv_cache_dtype=est.kv_cache_dtype,
                                   max_model_len=mml, gpu_memory_utilization=util, expert_parallel=ep,
                                   max_num_seqs=seqs, max_num_batched_tokens=budget, clients=burst.clients)
    replay = _DRAINS[key]
    return replay.result.output_tokens_per_s_at(*factors), replay.limits


_DRAINS: dict[tuple[str, str, int, object], BurstReplay] = {}


def current_vllm_report(outcomes: list[Outcome]) -> list[str]:
    """Lines for the independent vLLM >= 0.6 check: per metric and per metric x GPU on the dense BF16 rows, per
    metric for each other regime (quantized / MoE / fp8 KV, keyed '[label] metric'), then every row."""
    rows = [o for o in outcomes if o.regime.startswith(CURRENT_VLLM_REGIME)]
    if not rows:
        return []
    lines = ["", "independent check on measured vLLM >= 0.6 rows (not fitted; each with the profile of how it ran: "
                 "V1 `vllm`, V0 multi-step `vllm-0.6`, V0 single-step `vllm-0.5`):"]
    keys: dict[str, list[float]] = defaultdict(list)
    for o in rows:
        if o.regime == CURRENT_VLLM_REGIME:
            keys[f"all {o.metric}"].append(o.error)
            keys[f"{o.metric} {o.note.split()[0]}"].append(o.error)
        else:
            label = o.group[len(CURRENT_VLLM_GROUP) + 2:].split(",")[0].rstrip(")")
            keys[f"[{label}] {o.metric}"].append(o.error)
            keys[f"[all quantized/MoE/fp8 KV] {o.metric}"].append(o.error)
    for key, errs in sorted(keys.items(), key=lambda kv: (kv[0].startswith("["), kv[0])):
        lines.append(f"  {key:<40} n={len(errs):>2}  median|err| {statistics.median(abs(e) for e in errs):6.1%}  "
                     f"bias {statistics.median(errs):+6.1%}")
    for o in rows:
        lines.append(f"  {o.row_id} {o.metric:<20} measured {o.measured:>9.2f} predicted {o.predicted:>9.2f} "
                     f"({o.error:+.0%}) {o.note}")
    return lines


def _cpu_row(row: dict[str, str], model: ModelArchitecture, measured: float) -> Outcome | str:
    hw = yaml.safe_load((DATA / "calibration_hardware.yaml").read_text())["cpus"]
    label = row["hardware"].lower()
    key = "ryzen-9-7950x" if "7950x" in label else "threadripper-pro-5975wx" if "5975wx" in label else None
    if key is None:
        return f"{row['id']}: CPU not described"
    spec = hw[key]
    cpu = CpuModel(id=key, display_name=spec["display_name"], vendor="amd", arch="x86_64",
                   microarchitecture="Zen", simd=spec["simd"], source=spec["source"],
                   fp32_flops_per_cycle_per_core=spec["fp32_flops_per_cycle_per_core"],
                   sustained_clock_ghz=spec["sustained_clock_ghz"],
                   memory_bandwidth_gb_per_s=spec["memory_bandwidth_gb_per_s"], cores_per_socket=spec["cores"])
    threads = int(label.split("),")[1].split("threads")[0].strip()) if ")," in label else spec["cores"]
    s = cpu_setup(cpu, spec["cores"], threads=threads)
    prec = precision_of(row["precision"], "")
    active = float(param_groups(model).active())
    group = f"{row['engine']} ({'low-confidence CPU figures' if spec['confidence'] == 'low' else key})"
    # Rows of other llama.cpp builds (2024 mainline, ik_llama.cpp): no weight type passed, so the pinned tree's
    # x86 kernel rates (performance.yaml cpu.avx2_weight_kernels) do not apply to them.
    if row["metric"].startswith("pp"):
        n = int(row["input_len"])
        pred = n / prompt_s(s, active, n)
        return Outcome(row["id"], group, row["metric"], measured, pred, "cpu-prompt")
    weights = gguf_weight_bytes(model, prec)
    pred = 1.0 / generation_step_s(s, weights, active, 0.0, 1)
    return Outcome(row["id"], group, row["metric"], measured, pred, "cpu-generation")


#: The first vLLM release whose default engine is V1 (0.8.0); older rows ran V0.
V1_DEFAULT = (0, 8)
_MULTI_STEP = re.compile(r"num[-_]scheduler[-_]steps[ =]([2-9]|[1-9]\d+)\b")


def release_profile(row: dict[str, str]) -> str:
    """The engine profile a vLLM row is predicted with, decided by how its engine ran, never by its error: V1
    (0.8 and later) the current `vllm`; V0 with multi-step scheduling (`--num-scheduler-steps` > 1 in the notes)
    `vllm-0.6`, fitted on such runs of 0.6.0; V0 with single-step scheduling `vllm-0.5`, fitted on such runs of
    0.5.4."""
    m = re.match(r"\s*(\d+)\.(\d+)", row["engine_version"])
    if row["engine"] != "vLLM" or m is None or (int(m[1]), int(m[2])) >= V1_DEFAULT:
        return "vllm"
    return "vllm-0.6" if _MULTI_STEP.search(f"{row['engine_version']} {row['notes']}") else "vllm-0.5"


@contextlib.contextmanager
def constants_in_force(c: constants_mod.PerformanceConstants) -> Iterator[None]:
    """Evaluate with `c` in place of the constants now in force (in-process; cached layouts dropped on the way in
    and out, so nothing computed under one set is read under the other)."""
    constants_mod.OVERRIDE.append(c)
    gpu_setup.cache_clear()
    vllm_memory.cache_clear()
    try:
        yield
    finally:
        constants_mod.OVERRIDE.pop()
        gpu_setup.cache_clear()
        vllm_memory.cache_clear()


@contextlib.contextmanager
def engine_profile(name: str) -> Iterator[None]:
    """estimate() and the drains run with performance.yaml's engines.<name> standing in for `vllm`; `vllm` itself:
    nothing changes."""
    if name == "vllm":
        yield
        return
    c = constants_mod.load_constants()
    with constants_in_force(c.model_copy(update={"engines": {**c.engines, "vllm": c.engines[name]}})):
        yield


def evaluate_all(engines: tuple[str, ...] = ()) -> tuple[list[Outcome], list[str]]:
    """Evaluate every row (or only rows of `engines`)."""
    outcomes: list[Outcome] = []
    skipped: list[str] = []
    for row in read_rows():
        if engines and row["engine"] not in engines:
            continue
        if engines and (is_current_vllm_check(row) or is_expert_parallel_check(row) or is_fitted_vllm_row(row)):
            continue  # independent check rows (and vllm-0.6's own fit rows) never feed fit() (which filters by engine)
        res = evaluate_row(row)
        (skipped if isinstance(res, str) else outcomes).append(res)  # type: ignore[arg-type]
    return outcomes, skipped


def summarise(outcomes: list[Outcome]) -> list[tuple[str, str, int, float, float]]:
    groups: dict[tuple[str, str], list[float]] = defaultdict(list)
    for o in outcomes:
        groups[(o.group, o.metric)].append(o.error)
    table = []
    for (group, metric), errs in sorted(groups.items()):
        table.append((group, metric, len(errs), statistics.median(abs(e) for e in errs), statistics.median(errs)))
    return table


def ceiling_check(outcomes: list[Outcome]) -> tuple[int, int]:
    """vLLM predictions vs TensorRT-LLM measurements on the same saturation rows: how many exceed +15 %."""
    over = total = 0
    for row in read_rows():
        if row["engine"] != "TensorRT-LLM" or "max-load" not in row["concurrency"]:
            continue
        name, g = model_of(row["model"]), gpu_of(row["hardware"])
        if name is None or g is None:
            continue
        model, acc = arch(name), _accelerator(*g)
        tp, inp, out = int(row["tp"]), int(row["input_len"]), int(row["output_len"])
        est = estimate(model, hardware_from_gpu(acc, tp), precision=precision_of(row["precision"], acc.id), tp=tp,
                       input_len=inp, output_len=out, concurrency=None)
        if not est.fits:
            continue
        total += 1
        if est.output_tokens_per_s > 1.15 * float(row["value"]):
            over += 1
    return over, total


def _by_regime(outcomes: list[Outcome], value: Callable[[Outcome], float]) -> dict[str, list[float]]:
    """Values per error regime, as `estimate` assigns regimes (unsourced CPU figures and forks left out)."""
    by: dict[str, list[float]] = defaultdict(list)
    for o in outcomes:
        if "low-confidence" in o.group or o.group.startswith("ik_llama.cpp"):
            continue  # unsourced CPU figures / a faster fork: not evidence about the product's model
        if o.regime in (EXPERT_PARALLEL_REGIME, FITTED_REGIME):
            continue  # a layout check (expert_parallel_report) / a fit's rows (an old release's profile): no band
        # Many-expert MoE rows form one band, as `estimate` gives those models that regime; the independent
        # vLLM >= 0.6 MoE rows (Qwen3-235B, DeepSeek-R1) are its only rows and still never feed `fit`.
        moe_check = o.regime.startswith(CURRENT_VLLM_REGIME) and "moe" in o.regime
        by[MANY_EXPERT_MOE_REGIME if moe_check else o.regime].append(value(o))
    return by


def bands(outcomes: list[Outcome]) -> dict[str, tuple[float, int]]:
    """Per-regime band: the 80th percentile of absolute error (at least the median of all rows)."""
    out = {}
    for regime, errs in _by_regime(outcomes, lambda o: abs(o.error)).items():
        errs.sort()
        band = errs[min(len(errs) - 1, int(0.8 * len(errs)))]
        small = len(errs) < MIN_BAND_ROWS and not regime.startswith("memory-")
        out[regime] = (max(band, SMALL_SAMPLE_BAND) if small else band, len(errs))
    return out


#: Metrics that are times (a slow prediction is a high one); every other speed metric is a rate.
LATENCY_METRICS = ("latency_ms_as_reported", "TTFT_ms", "ttft_ms", "tpot_ms")


def latency_ratio(o: Outcome) -> float:
    """How much longer the real latency was than predicted: measured / predicted for a time, predicted /
    measured for a rate (an over-predicted throughput is an under-predicted time per token)."""
    assert o.predicted is not None
    return o.measured / o.predicted if o.metric in LATENCY_METRICS else o.predicted / o.measured


def confidence_factors(outcomes: list[Outcome], quantile: float = 0.9) -> dict[str, tuple[float, int]]:
    """Per-regime latency factor at `quantile` of the model's error (performance.yaml slo_confidence): the
    `quantile` of latency_ratio over the regime's rows, at least 1 (the median estimate) and, below MIN_BAND_ROWS
    rows, at least 1 + SMALL_SAMPLE_BAND (as the bands)."""
    out = {}
    for regime, ratios in _by_regime(outcomes, latency_ratio).items():
        if regime.startswith("memory-"):
            continue
        ratios.sort()
        q = ratios[min(len(ratios) - 1, int(quantile * len(ratios)))]
        floor = 1.0 + SMALL_SAMPLE_BAND if len(ratios) < MIN_BAND_ROWS else 1.0
        out[regime] = (round(max(q, floor), 3), len(ratios))
    return out


def _loss(outcomes: list[Outcome], keep: Callable[[Outcome], bool]) -> float:
    errs = [abs(math.log(o.predicted / o.measured)) for o in outcomes if keep(o) and o.predicted]
    return statistics.median(errs) if errs else 0.0


def fit(only: tuple[str, ...] = ()) -> None:
    """Coordinate search of engine constants: TRT-LLM on TRT rows, vLLM on Lambda rows, CPU on llama.cpp rows."""
    path = constants_mod.PERFORMANCE_FILE
    doc = yaml.safe_load(path.read_text())
    plan: list[tuple[str, tuple[str, ...], dict[str, tuple[float, float | None]]]] = [
        ("tensorrt-llm", ("TensorRT-LLM",),
         {"prefill_compute_fraction": (0.3, 0.95), "decode_bandwidth_fraction": (0.4, 0.95),
          "kv_bandwidth_fraction": (0.2, 0.95), "moe_bandwidth_fraction": (0.2, 0.95), "step_overhead_ms": (0.0, 10.0),
          "per_layer_overhead_us": (0.0, 40.0)}),
        ("interconnect", ("TensorRT-LLM",),
         {"pcie_link_efficiency": (0.1, 1.0), "link_efficiency": (0.3, 1.0)}),
        # vLLM's kernels are not assumed better than TensorRT-LLM's: fractions searched up to TRT's fitted values.
        ("vllm-0.5", ("vLLM",),
         {"step_overhead_ms": (0.0, 30.0), "per_seq_overhead_ms": (0.0, 0.3),
          "per_layer_overhead_us": (0.0, 60.0), "decode_bandwidth_fraction": (0.3, None),
          "kv_bandwidth_fraction": (0.2, None), "moe_bandwidth_fraction": (0.1, None),
          "prefill_compute_fraction": (0.2, None)}),
        # The host overheads alone, the kernel fractions kept (what the per-GEMM floor of linear_kernel moved).
        ("vllm-0.5-overheads", ("vLLM",),
         {"step_overhead_ms": (0.0, 30.0), "per_seq_overhead_ms": (0.0, 0.3), "per_layer_overhead_us": (0.0, 60.0)}),
    ]
    for engine, rows_of, params in plan:
        if only and engine not in only:
            continue
        for _ in range(2):
            for key, (lo, top) in params.items():
                name = engine.removesuffix("-overheads")
                section = doc["interconnect"] if engine == "interconnect" else doc["engines"][name]
                hi = top if top is not None else doc["engines"]["tensorrt-llm"][key]
                best = (math.inf, section[key])
                for i in range(13):
                    value = round(lo + (hi - lo) * i / 12, 4)
                    section[key] = value
                    _apply(doc)
                    loss = _loss(evaluate_all(rows_of)[0], lambda o: o.metric != "weights_GiB_per_gpu")
                    if loss < best[0]:
                        best = (loss, value)
                section[key] = best[1]
                _apply(doc)
            print(engine, {k: section[k] for k in params}, file=sys.stderr)
    if not only or "vllm" in only:
        fit_release(doc)
    keep_cpu = lambda o: o.group.startswith("llama.cpp (ryzen")  # noqa: E731
    for key, (lo, hi) in {"generation_bandwidth_fraction": (0.3, 1.0), "per_thread_bandwidth_gb_per_s": (4.0, 30.0),
                          "prompt_flops_fraction": (0.2, 1.0)}.items():
        best = (math.inf, doc["cpu"][key])
        for i in range(15):
            doc["cpu"][key] = round(lo + (hi - lo) * i / 14, 4)
            _apply(doc)
            loss = _loss(evaluate_all(("llama.cpp",))[0], keep_cpu)
            if loss < best[0]:
                best = (loss, doc["cpu"][key])
        doc["cpu"][key] = best[1]
        _apply(doc)
    print(yaml.safe_dump({"engines": doc["engines"], "interconnect": doc["interconnect"], "cpu": doc["cpu"]},
                         sort_keys=False))
    outcomes, _ = evaluate_all()
    print(yaml.safe_dump({"uncertainty": {r: {"relative": round(b, 3), "rows": n} for r, (b, n) in
                                          bands(outcomes).items()}}, sort_keys=False))


def _apply(doc: dict[str, object]) -> None:
    """Use an in-memory constants document for the next evaluation (fit only); cached layouts are dropped."""
    constants_mod.OVERRIDE[:] = [constants_mod.PerformanceConstants.model_validate(doc)]
    gpu_setup.cache_clear()
    vllm_memory.cache_clear()


#: vLLM blog 'vLLM v0.6.0: 2.7x Throughput Improvement and 5x Latency Reduction' (2024-09-05): v0.6.0 vs v0.5.3
#: on ShareGPT (500 prompts): 2.7x throughput for Llama 3 8B on 1 x H100, 1.8x for 70B on 4 x H100.
RELEASE_GAIN_8B = 2.7
RELEASE_GAIN_70B = 1.8


def release_gain(model_name: str, tp: int) -> float:
    """Predicted throughput of the current `vllm` profile over `vllm-0.5` on 500 ShareGPT prompts, H100 bf16."""
    model, acc = arch(model_name), _accelerator("h100-sxm", "")
    ins, outs = _sharegpt_lengths(500)
    mem = vllm_memory(model, 80.0, "bf16", "bf16", tp, 1, 0.9)
    rates = []
    for engine in ("vllm", "vllm-0.5"):
        setup = gpu_setup(model, gpu_figures(acc), "bf16", mem.kv_bytes_per_token_gpu, engine, tp, 1, 1)
        rates.append(simulate_drain(setup, ins, outs, 256, mem.capacity_tokens).output_tokens_per_s)
    return rates[0] / rates[1]


def fit_release(doc: dict[str, object]) -> None:
    """Scale vllm-0.5's host overheads by one factor k so the 8B gain matches the blog's 2.7x (70B: a check)."""
    engines = doc["engines"]  # type: ignore[index]
    old = engines["vllm-0.5"]  # type: ignore[index]
    own = engines["vllm"]  # type: ignore[index]
    keys = ("step_overhead_ms", "per_seq_overhead_ms", "per_layer_overhead_us")
    shared = ("prefill_compute_fraction", "decode_bandwidth_fraction", "kv_bandwidth_fraction", "linear_kernel")

    def scaled(k: float) -> dict[str, object]:
        # vllm-0.5's kernel fractions and linear kernel, its host overheads x k; `vllm`'s own measured kernels
        # (moe_kernel, block_fp8_linear) and serving path (first_token_*) stay. No floor at TensorRT-LLM's fitted
        # overheads: with one, the model reaches only 1.30x of the blog's 2.7x.
        return {**own, **{key: old[key] for key in shared if key in old},
                **{key: round(old[key] * k, 4) for key in keys}}

    best = (math.inf, 1.0)
    for i in range(1, 41):
        k = i / 40
        engines["vllm"] = scaled(k)  # type: ignore[index]
        _apply(doc)
        err = abs(math.log(release_gain("llama-3.1-8b", 1) / RELEASE_GAIN_8B))
        if err < best[0]:
            best = (err, k)
    k = best[1]
    engines["vllm"] = scaled(k)  # type: ignore[index]
    _apply(doc)
    print(f"release factor k={k}: 8B gain {release_gain('llama-3.1-8b', 1):.2f} (blog 2.7), "
          f"70B TP4 gain {release_gain('llama-3.1-70b', 4):.2f} (blog 1.8, not fitted)", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--fit", action="store_true", help="search the engine constants and print them as YAML")
    parser.add_argument("--rows", action="store_true", help="print every row")
    parser.add_argument("--only", action="append", default=[], help="with --fit: fit only this section")
    parser.add_argument("--doc", type=Path, help="also rewrite this markdown file's report blocks (fenced blocks "
                        "whose first line is a section heading of this report) with today's figures")
    parser.add_argument("--kv-sweep", help="comma-separated engines.vllm.kv_bandwidth_fraction values: print the "
                        "independent vLLM >= 0.6 rows' errors at each (in-process override) and stop")
    parser.add_argument("--ids", help="with --kv-sweep: only the rows FIRST to LAST, as FIRST-LAST (EX0055-EX0086)")
    args = parser.parse_args()
    if args.kv_sweep:
        ids = tuple(args.ids.split("-", 1)) if args.ids else None
        fractions = [float(x) for x in args.kv_sweep.split(",")]
        print("\n".join(kv_sweep_report(evaluate_row, fractions, ids)))
        return
    if args.fit and args.only == ["cpu-measured"]:
        current = constants_mod.load_constants().cpu.measured_bandwidth_fraction
        print(f"cpu:\n  measured_bandwidth_fraction: {fit_measured_fraction(bench_rows(), current):.4f}")
        return
    if args.fit:
        fit(tuple(args.only))
        return
    if args.doc:
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            report_all(args.rows)
        print(buffer.getvalue(), end="")
        update_doc(args.doc, buffer.getvalue())
        return
    report_all(args.rows)


def report_all(rows: bool) -> None:
    """Print the whole report."""
    outcomes, skipped = evaluate_all()
    print(f"{'source':<46} {'metric':<30} {'n':>4} {'median|err|':>11} {'bias':>8}")
    for group, metric, n, mape, bias in summarise(outcomes):
        print(f"{group:<46} {metric:<30} {n:>4} {mape:>10.1%} {bias:>+8.1%}")
    print("\nworst rows per source:")
    by: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        by[o.group].append(o)
    for group, group_outcomes in sorted(by.items()):
        for o in sorted(group_outcomes, key=lambda o: -abs(o.error))[:3]:
            print(f"  {group:<44} {o.row_id} {o.metric:<28} measured {o.measured:>10.2f} "
                  f"predicted {o.predicted:>10.2f} ({o.error:+.0%}) {o.note}")
    print(f"\nvLLM release check (v0.6 vs v0.5 throughput, ShareGPT 500 prompts, H100 bf16): "
          f"8B TP1 {release_gain('llama-3.1-8b', 1):.2f}x (blog {RELEASE_GAIN_8B}x, fitted), "
          f"70B TP4 {release_gain('llama-3.1-70b', 4):.2f}x (blog {RELEASE_GAIN_70B}x, not fitted)")
    over, total = ceiling_check(outcomes)
    print(f"\nvLLM prediction > 1.15 x TensorRT-LLM measurement: {over} of {total} saturation rows")
    print("\nerror bands (80th percentile |err|) per regime:")
    for regime, (band, n) in sorted(bands(outcomes).items()):
        print(f"  {regime:<46} {band:6.1%}  ({n} rows)")
    print("\nslo_confidence p90 latency factors (90th percentile of measured/predicted time) per regime:")
    for regime, (factor, n) in sorted(confidence_factors(outcomes).items()):
        print(f"  {regime:<46} x{factor:.3f}  ({n} rows)")
    for line in tp_ratio_report(outcomes):
        print(line)
    for line in tp_series_report(outcomes):
        print(line)
    from burst_ttft_check import report as burst_ttft_report  # the 0.6.0 bursts' first tokens (benchmarks/)

    for line in burst_ttft_report():
        print(line)
    for line in dense_gemm_report():
        print(line)
    for line in regime_split_report(outcomes):
        print(line)
    for line in moe_kernel_report():
        print(line)
    for line in current_vllm_report(outcomes):
        print(line)
    for line in expert_parallel_report(outcomes):
        print(line)
    llama_rows = bench_rows()
    for line in [*llama_bench_report(llama_rows), *llama_target_lines(llama_rows)]:
        print(line)
    from calibrate_check import report as calibrate_report  # the calibrate target (benchmarks/)

    for line in calibrate_report(verbose=False):  # per-result lines: python benchmarks/calibrate_check.py
        print(line)
    from online_rate_check import report as online_report  # online-rate rows, reported apart (benchmarks/)

    for line in online_report():
        print(line)
    from closed_loop_check import report as closed_report  # max_concurrency runs, reported apart (benchmarks/)

    for line in closed_report():
        print(line)
    print(f"\nunusable rows: {len(skipped)}")
    for reason in skipped[:8]:
        print("  " + reason)
    if rows:
        for o in outcomes:
            print(o.row_id, o.group, o.metric, o.measured, round(o.predicted or 0, 2), f"{o.error:+.1%}", o.note)


if __name__ == "__main__":
    main()
