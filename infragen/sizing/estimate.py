"""Public entry points of the model: `estimate_memory` (cheap, for pruning) and `estimate` (memory + speed).

Combines memory.py, performance.py and cpu_performance.py; `fits=False` is an answer with a reason, while
impossible inputs (tp*pp larger than the GPUs, vLLM on a CPU) raise InputError. No I/O beyond cached data.
"""

from __future__ import annotations

import math
from dataclasses import replace

from infragen.architecture import ModelArchitecture
from infragen.catalog.compat import architecture_problem, kernel_problem, tp_check, wheel_problem
from infragen.catalog.engines import expert_parallel_flag
from infragen.errors import InputError
from infragen.sizing.constants import load_constants
from infragen.sizing.cpu_performance import CpuSetup, cpu_setup, generation_step_s, prompt_s
from infragen.sizing.hardware import hardware_from_gpu, hardware_from_instance, load_hardware_file
from infragen.sizing.memory import (
    GGUF_FORMATS,
    VLLM_WEIGHT_FORMATS,
    default_kv_dtype,
    gguf_weight_bytes,
    kv_bytes_per_token,
    largest_model_len,
    max_sequences,
    param_groups,
    vllm_memory,
    vllm_profile_tokens,
)
from infragen.sizing.performance import (
    MANY_EXPERT_MOE_REGIME,
    GpuSetup,
    first_token_s,
    gpu_figures,
    gpu_setup,
    is_many_expert_moe,
    steady_state,
)
from infragen.sizing.types import Estimate, Hardware, MemoryEstimate
from infragen.sizing.uncertainty import relative_band
from infragen.units import DTYPE_BYTES, GIB

__all__ = [
    "Estimate",
    "Hardware",
    "MemoryEstimate",
    "estimate",
    "estimate_memory",
    "hardware_from_gpu",
    "hardware_from_instance",
    "load_hardware_file",
]

#: How the note on prefix-cache credit starts (the plan says it in its Why section instead of a warning).
PREFIX_CACHE_NOTE = "prefix cache"
#: llama.cpp parallel slots infragen configures at most (a policy default, not a measurement).
LLAMA_CPP_MAX_SLOTS = 16
#: Largest batch of TensorRT-LLM's saturation benchmark assumed for the ceiling (trtllm-bench; assumption).
TRTLLM_MAX_BATCH = 2048
#: Host RAM kept for the OS, llama-server's compute buffers and page cache slack, GiB (assumption).
LLAMA_CPP_HOST_RESERVED_GIB = 2.0


def _gib(n_bytes: float) -> float:
    return n_bytes / GIB


def _check_layout(hardware: Hardware, engine: str, tp: int, pp: int, nodes: int) -> None:
    if tp < 1 or pp < 1 or nodes < 1:
        raise InputError(f"tp, pp and nodes must be >= 1 (got tp={tp}, pp={pp}, nodes={nodes})")
    if engine == "vllm":
        if hardware.accelerator is None or hardware.gpu_count == 0:
            raise InputError(f"{hardware.name} has no GPU: vLLM needs GPUs (use --engine llama.cpp for CPUs)")
        if tp * pp > hardware.gpu_count * nodes:
            raise InputError(
                f"tp x pp = {tp * pp} GPUs but {nodes} node(s) of {hardware.name} have {hardware.gpu_count * nodes}"
            )
        if nodes > 1 and tp > hardware.gpu_count:
            raise InputError(f"tp={tp} must fit inside one node ({hardware.gpu_count} GPUs); span nodes with pp")
    elif engine == "llama.cpp":
        if tp != 1 or pp != 1 or nodes != 1:
            raise InputError("llama.cpp runs one process per host here: tp, pp and nodes must be 1")
    else:
        raise InputError(f"unknown engine {engine!r}; use vllm or llama.cpp")


def queue_wait_s(asked: int, running: int, e2e_s: float) -> float:
    """Mean wait for a batch slot when `asked` requests are in flight but only `running` fit (closed loop).

    Little's law: the slots complete running / e2e requests per second, so each of the `asked` requests spends
    asked x e2e / running in the system, of which e2e is service. Without it, a shorter KV capacity (longer
    requests) would look faster because fewer requests run at once.
    """
    if asked <= running or running < 1:
        return 0.0
    return e2e_s * (asked / running - 1.0)


def _not_fitting(base: dict[str, object], reason: str) -> MemoryEstimate:
    return MemoryEstimate(
        fits=False,
        reason=reason,
        weights_gib_per_gpu=float(base.get("weights_gib_per_gpu", 0.0)),  # type: ignore[arg-type]
        kv_cache_bytes_per_token=int(base.get("kv_cache_bytes_per_token", 0)),  # type: ignore[call-overload]
        kv_cache_gib_per_gpu=0.0,
        kv_cache_capacity_tokens=0,
        overhead_gib_per_gpu=float(base.get("overhead_gib_per_gpu", 0.0)),  # type: ignore[arg-type]
        max_model_len=0,
        budget_gib_per_gpu=float(base.get("budget_gib_per_gpu", 0.0)),  # type: ignore[arg-type]
        engine=str(base["engine"]),
        precision=str(base["precision"]),
        kv_cache_dtype=str(base["kv_cache_dtype"]),
        tp=int(base["tp"]),  # type: ignore[call-overload]
        pp=int(base["pp"]),  # type: ignore[call-overload]
        nodes=int(base["nodes"]),  # type: ignore[call-overload]
    )


def estimate_memory(
    model: ModelArchitecture,
    hardware: Hardware,
    *,
    precision: str,
    kv_cache_dtype: str = "auto",
    engine: str = "vllm",
    tp: int = 1,
    pp: int = 1,
    nodes: int = 1,
    max_model_len: int | None = None,
    gpu_memory_utilization: float = 0.9,
    fp8_scope: str = "all-linear",
    expert_parallel: bool = False,
) -> MemoryEstimate:
    """Weights, overheads and KV cache per GPU (vLLM) or in host RAM (llama.cpp); cheap and cached."""
    _check_layout(hardware, engine, tp, pp, nodes)
    kv_dtype = default_kv_dtype(precision, kv_cache_dtype, engine)
    kv_total = kv_bytes_per_token(model, DTYPE_BYTES[kv_dtype])
    base: dict[str, object] = dict(
        engine=engine, precision=precision, kv_cache_dtype=kv_dtype, tp=tp, pp=pp, nodes=nodes,
        kv_cache_bytes_per_token=kv_total,
    )
    if engine == "llama.cpp":
        return _llama_cpp_memory(model, hardware, precision, kv_total, max_model_len, base)
    if precision not in VLLM_WEIGHT_FORMATS:
        raise InputError(f"precision {precision!r} is not served by vLLM; use one of {', '.join(VLLM_WEIGHT_FORMATS)}")
    acc = hardware.accelerator
    assert acc is not None  # _check_layout guarantees it
    # compat.yaml: the pinned release serves the architecture, its wheel and kernels run on this GPU (a user's
    # hardware file without a compute capability is taken at its word)
    support = (architecture_problem("vllm", model.family, unknown_ok=True)
               or (wheel_problem(acc) if acc.compute_capability is not None else None)
               or kernel_problem(acc, "weights", precision, unknown_ok=True))
    if support:
        return _not_fitting(base, support)
    # compat.yaml tp_rules: heads, KV heads, vocabulary, MLP and expert widths (and FP8 blocks when served as fp8)
    sharding = tp_check(model, tp, weight_block_size=model.weight_block_size if precision == "fp8" else None,
                        acc=acc, expert_parallel=expert_parallel)
    if sharding.problem:
        return _not_fitting(base, sharding.problem)
    per_gpu_gib = hardware.memory_per_gpu_gib
    if not 0 < gpu_memory_utilization <= 1:  # also nan
        raise InputError(f"gpu_memory_utilization must be in (0, 1] (got {gpu_memory_utilization})")
    m = vllm_memory(model, per_gpu_gib, precision, kv_dtype, tp, pp, gpu_memory_utilization, fp8_scope,
                    profile_tokens=vllm_profile_tokens(model, max_model_len))
    base.update(
        weights_gib_per_gpu=_gib(m.weights_bytes),
        overhead_gib_per_gpu=_gib(m.overhead_bytes),
        budget_gib_per_gpu=_gib(m.budget_bytes),
    )
    gpus = tp * pp
    if m.weights_bytes > m.budget_bytes:
        total_need = _gib(m.weights_bytes) * gpus
        return _not_fitting(
            base,
            f"weights need {total_need:.1f} GiB ({_gib(m.weights_bytes):.1f} GiB per GPU), {gpus} x {acc.id} give "
            f"{_gib(m.budget_bytes) * gpus:.1f} GiB at gpu_memory_utilization {gpu_memory_utilization}",
        )
    if m.capacity_tokens <= 0:
        return _not_fitting(
            base,
            f"after {_gib(m.weights_bytes):.1f} GiB of weights and {_gib(m.overhead_bytes):.1f} GiB of activations, "
            f"CUDA graphs and buffers per GPU, no KV cache is left of the {_gib(m.budget_bytes):.1f} GiB budget",
        )
    longest = largest_model_len(model, m.capacity_tokens)
    if max_model_len is not None and max_model_len > longest:
        return _not_fitting(
            base,
            f"max_model_len {max_model_len} needs more KV cache than the {m.capacity_tokens} tokens that fit"
            if max_model_len <= model.max_position_embeddings
            else f"max_model_len {max_model_len} exceeds the model's context of {model.max_position_embeddings}",
        )
    return MemoryEstimate(
        fits=True,
        reason=None,
        engine=engine,
        precision=precision,
        kv_cache_dtype=kv_dtype,
        tp=tp,
        pp=pp,
        nodes=nodes,
        weights_gib_per_gpu=_gib(m.weights_bytes),
        kv_cache_bytes_per_token=kv_total,
        kv_cache_gib_per_gpu=_gib(m.capacity_tokens * m.kv_bytes_per_token_gpu),
        kv_cache_capacity_tokens=m.capacity_tokens,
        overhead_gib_per_gpu=_gib(m.overhead_bytes),
        max_model_len=longest,
        budget_gib_per_gpu=_gib(m.budget_bytes),
    )


def _llama_cpp_memory(
    model: ModelArchitecture,
    hardware: Hardware,
    precision: str,
    kv_total: int,
    max_model_len: int | None,
    base: dict[str, object],
) -> MemoryEstimate:
    if precision not in GGUF_FORMATS:
        raise InputError(f"precision {precision!r} is not a GGUF type; use one of {', '.join(GGUF_FORMATS)}")
    if hardware.accelerator is not None:
        raise InputError(f"{hardware.name} has GPUs: infragen models llama.cpp on CPUs only; use --engine vllm")
    if hardware.memory_gib is None:
        return _not_fitting(base, f"{hardware.name}: system memory is not in the data")
    weights = gguf_weight_bytes(model, precision)
    budget = (hardware.memory_gib - LLAMA_CPP_HOST_RESERVED_GIB) * GIB
    base.update(weights_gib_per_gpu=_gib(weights), overhead_gib_per_gpu=LLAMA_CPP_HOST_RESERVED_GIB,
                budget_gib_per_gpu=_gib(budget))
    if weights > budget:
        return _not_fitting(
            base,
            f"GGUF weights need {_gib(weights):.1f} GiB, {hardware.name} has {hardware.memory_gib:.0f} GiB of RAM "
            f"({LLAMA_CPP_HOST_RESERVED_GIB:.0f} GiB kept for the OS and buffers)",
        )
    kv_budget = budget - weights
    capacity = int(kv_budget // kv_total)
    longest = largest_model_len(model, capacity)
    if max_model_len is not None and max_model_len > longest:
        return _not_fitting(
            base, f"context {max_model_len} needs more RAM for the KV cache than the {capacity} tokens left"
        )
    return MemoryEstimate(
        fits=True, reason=None, engine="llama.cpp", precision=precision, kv_cache_dtype="fp16", tp=1, pp=1, nodes=1,
        weights_gib_per_gpu=_gib(weights), kv_cache_bytes_per_token=kv_total, kv_cache_gib_per_gpu=_gib(kv_budget),
        kv_cache_capacity_tokens=capacity, overhead_gib_per_gpu=LLAMA_CPP_HOST_RESERVED_GIB, max_model_len=longest,
        budget_gib_per_gpu=_gib(budget),
        notes=("llama.cpp maps the GGUF file (mmap): weights count as resident RAM",),
    )


def _empty_estimate(mem: MemoryEstimate, reason: str, concurrency: int, max_conc: int = 0) -> Estimate:
    return Estimate(
        fits=False, reason=reason, engine=mem.engine, precision=mem.precision, kv_cache_dtype=mem.kv_cache_dtype,
        tp=mem.tp, pp=mem.pp, nodes=mem.nodes, concurrency=concurrency,
        weights_gib_per_gpu=mem.weights_gib_per_gpu, kv_cache_bytes_per_token=mem.kv_cache_bytes_per_token,
        kv_cache_gib_per_gpu=mem.kv_cache_gib_per_gpu, kv_cache_capacity_tokens=mem.kv_cache_capacity_tokens,
        overhead_gib_per_gpu=mem.overhead_gib_per_gpu, max_concurrency=max_conc, max_model_len=mem.max_model_len,
        ttft_ms=0.0, tpot_ms=0.0, e2e_ms=0.0, output_tokens_per_s=0.0, requests_per_s=0.0,
        relative_uncertainty=0.0, regime="does-not-fit", notes=mem.notes,
    )


def estimate(
    model: ModelArchitecture,
    hardware: Hardware,
    *,
    precision: str,
    kv_cache_dtype: str = "auto",
    engine: str = "vllm",
    tp: int = 1,
    pp: int = 1,
    nodes: int = 1,
    input_len: int,
    output_len: int,
    concurrency: int | None,
    max_model_len: int | None = None,
    gpu_memory_utilization: float = 0.9,
    decode_factor: float = 1.0,
    prefill_factor: float = 1.0,
    prefix_cache_hit_rate: float = 0.0,
    expert_parallel: bool = False,
    serving_overhead_ms: float | None = None,
) -> Estimate:
    """Memory, latency and throughput of one replica at `concurrency` running requests (None = the max).

    decode_factor / prefill_factor come from a calibration profile (sizing/calibration.py): they multiply the
    modelled generation and prompt-processing speeds of this hardware and engine (1 = the model as fitted).
    serving_overhead_ms (vLLM): a calibration profile's measured serving path, in place of the engine's default
    fixed part of TTFT (performance.yaml first_token_overhead_ms); None: the default.
    prefix_cache_hit_rate: share of prompt tokens vLLM finds in its prefix cache (cached_prompt_tokens says what
    is credited; llama.cpp: not credited).
    expert_parallel: vLLM's --enable-expert-parallel (MoE models; performance.gpu_setup says what it changes).
    """
    if decode_factor <= 0 or prefill_factor <= 0:
        raise InputError(f"calibration factors must be > 0 (got {decode_factor}, {prefill_factor})")
    if serving_overhead_ms is not None and not 0.0 <= serving_overhead_ms < math.inf:
        raise InputError(f"the serving overhead is a time in ms >= 0 (got {serving_overhead_ms})")
    if not 0.0 <= prefix_cache_hit_rate <= 1.0:
        raise InputError(f"the prefix cache hit rate is a share of prompt tokens in [0, 1] "
                         f"(got {prefix_cache_hit_rate})")
    if input_len < 1 or output_len < 1:
        raise InputError(f"input and output lengths must be >= 1 (got {input_len} and {output_len})")
    if concurrency is not None and concurrency < 1:
        raise InputError(f"concurrency must be >= 1 or max (got {concurrency})")
    ep_note = expert_parallel_problem(model, engine, tp) if expert_parallel else None
    expert_parallel = expert_parallel and ep_note is None
    mem = estimate_memory(
        model, hardware, precision=precision, kv_cache_dtype=kv_cache_dtype, engine=engine, tp=tp, pp=pp,
        nodes=nodes, max_model_len=max_model_len, gpu_memory_utilization=gpu_memory_utilization,
        expert_parallel=expert_parallel,
    )
    asked = concurrency or 0
    if not mem.fits:
        return _empty_estimate(mem, mem.reason or "does not fit", asked)
    seq_len = input_len + output_len
    if seq_len > mem.max_model_len:
        limit = "the model's context" if mem.max_model_len >= model.max_position_embeddings else "the KV cache"
        return _empty_estimate(
            mem, f"a request of {input_len} + {output_len} tokens is longer than max_model_len {mem.max_model_len} "
            f"({limit} limits it)", asked,
        )
    if engine == "llama.cpp":
        est = _estimate_llama_cpp(model, hardware, mem, input_len, output_len, concurrency,
                                  decode_factor, prefill_factor)
        if prefix_cache_hit_rate > 0:
            est = replace(est, notes=(*est.notes, "prefix cache hit rate not credited for llama.cpp (each slot "
                                      "reuses only its own previous prompt)"))
        return est
    c = load_constants()
    max_conc = min(c.vllm_memory.max_num_seqs,
                   max_sequences(model, mem.kv_cache_capacity_tokens, seq_len, c.vllm_memory.block_size_tokens))
    if max_conc < 1:
        return _empty_estimate(mem, f"not one request of {seq_len} tokens fits the KV cache", asked)
    notes = list(mem.notes) + ([ep_note] if ep_note else [])
    cached = cached_prompt_tokens(input_len, prefix_cache_hit_rate, c.vllm_memory.block_size_tokens)
    if prefix_cache_hit_rate > 0:
        notes.append(f"{PREFIX_CACHE_NOTE}: {cached:,} of {input_len:,} prompt tokens taken as cached (hit rate "
                     f"{prefix_cache_hit_rate:g} in whole {c.vllm_memory.block_size_tokens}-token blocks, the last "
                     "prompt token always computed); KV memory not credited")
    conc = max_conc if concurrency is None else concurrency
    if conc > max_conc:
        notes.append(f"{conc} concurrent requests exceed the {max_conc} that fit; vLLM queues the rest")
        conc = max_conc
    acc = hardware.accelerator
    assert acc is not None
    setup = vllm_step_setup(model, hardware, precision, mem.kv_cache_dtype, tp, pp, nodes, gpu_memory_utilization,
                            max_model_len, expert_parallel=expert_parallel)
    speed = steady_state(setup, input_len, output_len, conc, cached)
    tpot_s, ttft_s = speed.tpot_s, speed.ttft_s
    ceiling = vllm_step_setup(model, hardware, precision, mem.kv_cache_dtype, tp, pp, nodes, gpu_memory_utilization,
                              max_model_len, engine="tensorrt-llm", expert_parallel=expert_parallel)
    # The ceiling is TensorRT-LLM's saturation throughput for these lengths on this hardware (what its
    # published measurements are): all requests queued, batch up to 2048 or what the KV cache holds.
    trt_batch = max(1, min(TRTLLM_MAX_BATCH, mem.kv_cache_capacity_tokens // seq_len))
    best = steady_state(ceiling, input_len, output_len, trt_batch, cached)  # TensorRT-LLM reuses KV blocks too
    if speed.output_tokens_per_s > c.trtllm_ceiling_factor * best.output_tokens_per_s:
        tpot_s = conc / (c.trtllm_ceiling_factor * best.output_tokens_per_s)
        notes.append(f"capped at {c.trtllm_ceiling_factor} x the TensorRT-LLM saturation prediction")
    if (decode_factor, prefill_factor) != (1.0, 1.0):
        # a measured calibration of this hardware wins over the fitted fractions (and the ceiling)
        serving = first_token_s(setup)  # not GPU time: no calibration factor applies to it
        ttft_s = speed.prefill_s / prefill_factor + (ttft_s - speed.prefill_s - serving) / decode_factor + serving
        tpot_s /= decode_factor
        notes.append(_calibration_note(decode_factor, prefill_factor))
    if serving_overhead_ms is not None:
        ttft_s += serving_overhead_ms * 1e-3 - first_token_s(setup)
        notes.append(f"calibrated: serving path {serving_overhead_ms:.1f} ms of every TTFT (measured), not the "
                     f"{first_token_s(setup) * 1e3:.1f} ms default")
    e2e_s = ttft_s + (output_len - 1) * tpot_s
    requests_per_s = conc / e2e_s
    wait_s = queue_wait_s(asked, conc, e2e_s)
    ttft_s, e2e_s = ttft_s + wait_s, e2e_s + wait_s
    regime = "gpu-decode-compute-bound" if speed.compute_bound else "gpu-decode-memory-bound"
    if is_many_expert_moe(model):
        regime = MANY_EXPERT_MOE_REGIME  # measured rows of such models err far more than dense ones
    if nodes > 1:
        regime = "gpu-multi-node"
    return Estimate(
        fits=True, reason=None, engine=engine, precision=precision, kv_cache_dtype=mem.kv_cache_dtype,
        tp=tp, pp=pp, nodes=nodes, concurrency=conc,
        weights_gib_per_gpu=mem.weights_gib_per_gpu, kv_cache_bytes_per_token=mem.kv_cache_bytes_per_token,
        kv_cache_gib_per_gpu=mem.kv_cache_gib_per_gpu, kv_cache_capacity_tokens=mem.kv_cache_capacity_tokens,
        overhead_gib_per_gpu=mem.overhead_gib_per_gpu, max_concurrency=max_conc, max_model_len=mem.max_model_len,
        ttft_ms=ttft_s * 1e3, tpot_ms=tpot_s * 1e3, e2e_ms=e2e_s * 1e3,
        output_tokens_per_s=conc / tpot_s, requests_per_s=requests_per_s,
        relative_uncertainty=relative_band(regime), regime=regime, notes=tuple(notes),
        expert_parallel=expert_parallel,
    )


def vllm_step_setup(model: ModelArchitecture, hardware: Hardware, precision: str, kv_cache_dtype: str, tp: int,
                    pp: int, nodes: int, gpu_memory_utilization: float, max_model_len: int | None, *,
                    engine: str = "vllm", expert_parallel: bool = False) -> GpuSetup:
    """The step model's view of one vLLM replica on `hardware`'s GPUs (KV bytes per token as vLLM's memory split
    gives them): what estimate(), the load model and the burst replay all step. `engine`: whose constants price the
    kernels (tensorrt-llm for estimate()'s ceiling)."""
    acc = hardware.accelerator
    assert acc is not None  # vLLM runs on GPUs; callers refuse a machine without them first
    m = vllm_memory(model, hardware.memory_per_gpu_gib, precision, kv_cache_dtype, tp, pp, gpu_memory_utilization,
                    profile_tokens=vllm_profile_tokens(model, max_model_len))
    return gpu_setup(model, gpu_figures(acc), precision, m.kv_bytes_per_token_gpu, engine, tp, pp, nodes,
                     expert_parallel=expert_parallel)


def expert_parallel_problem(model: ModelArchitecture, engine: str, tp: int) -> str | None:
    """Raise InputError where expert parallelism cannot be asked for (no routed experts; an engine whose pinned
    release has no expert-parallel option: engines.yaml expert_parallel); a note where vLLM takes the flag but does
    not use it (tp 1); None where it applies."""
    if not model.num_experts:
        raise InputError(f"expert parallelism places routed experts on GPUs, but {model.id} has no routed experts "
                         "(a dense model): drop --expert-parallel")
    flag = expert_parallel_flag(engine)
    if flag is None:
        raise InputError(f"expert parallelism: the pinned {engine} release has no expert-parallel option "
                         "(engines.yaml expert_parallel)")
    if tp == 1:
        return (f"expert parallelism ({flag}) not used at tp 1: vLLM turns it on only when the experts have more "
                "than one GPU to go to, so this is the plain tp 1 estimate")
    return None


def cached_prompt_tokens(input_len: int, hit_rate: float, block_size_tokens: int) -> int:
    """Prompt tokens served from vLLM's prefix cache: hits are whole KV blocks and the last prompt token is always
    computed (its logits start the answer), so at most the full blocks before it."""
    hit = int(hit_rate * input_len) // block_size_tokens * block_size_tokens
    return max(0, min(hit, (input_len - 1) // block_size_tokens * block_size_tokens))


def _calibration_note(decode_factor: float, prefill_factor: float) -> str:
    return (f"calibrated: generation speed x{decode_factor:.3f}, prompt processing x{prefill_factor:.3f} "
            "(from a calibration profile of measured results)")


def llama_cpp_cpu_setup(hardware: Hardware) -> CpuSetup:
    """The CPU host llama.cpp runs on: its cores (one thread each) and bandwidth (measured when probed)."""
    from infragen.errors import MissingFigureError

    if hardware.cpu is None:
        raise MissingFigureError(f"{hardware.name}: the CPU model is not in the data; cannot estimate llama.cpp speed")
    tpc = getattr(hardware.cpu, "threads_per_core", None) or 1
    cores = hardware.physical_cores or (hardware.vcpus // tpc if hardware.vcpus else None)
    if cores is None:
        raise MissingFigureError(f"{hardware.name}: neither physical cores nor vCPUs are known")
    return cpu_setup(hardware.cpu, cores, sockets=hardware.cpu_sockets,
                     measured_bandwidth_gb_per_s=hardware.measured_memory_bandwidth_gb_per_s)


def attention_flops_per_token_pair(model: ModelArchitecture) -> float:
    """FLOPs of one token attending one other (QK^T and PV over every layer's heads)."""
    head_dim = model.head_dim or model.hidden_size // model.num_attention_heads
    return 2.0 * model.num_attention_heads * 2 * head_dim * model.num_layers


def _estimate_llama_cpp(
    model: ModelArchitecture,
    hardware: Hardware,
    mem: MemoryEstimate,
    input_len: int,
    output_len: int,
    concurrency: int | None,
    decode_factor: float = 1.0,
    prefill_factor: float = 1.0,
) -> Estimate:
    seq_len = input_len + output_len
    slots_fit = mem.kv_cache_capacity_tokens // seq_len
    max_conc = max(0, min(LLAMA_CPP_MAX_SLOTS, slots_fit))
    if max_conc < 1:
        return _empty_estimate(mem, f"not one request of {seq_len} tokens fits the RAM left for KV cache", 0)
    notes = list(mem.notes)
    conc = max_conc if concurrency is None else concurrency
    if conc > max_conc:
        notes.append(f"{conc} concurrent requests exceed the {max_conc} llama.cpp slots; the rest queue")
        conc = max_conc
    s = llama_cpp_cpu_setup(hardware)
    notes.extend(s.notes)
    active = float(param_groups(model).active())
    attn_flops = attention_flops_per_token_pair(model) * input_len * input_len / 2
    kind = mem.precision  # the GGUF weight type: its kernels' rates (cpu_performance.weight_kernel)
    t_prompt = prompt_s(s, active, input_len, attn_flops, kind) / prefill_factor
    weights = mem.weights_gib_per_gpu * GIB
    kv_read = conc * (input_len + output_len / 2) * mem.kv_cache_bytes_per_token
    step = generation_step_s(s, weights, active, kv_read, conc, kind) / decode_factor
    # compute alone, per slot of a full batch (the type's GEMM; one slot: its matrix-vector kernel)
    per_token = generation_step_s(s, 0.0, active, 0.0, conc, kind) / decode_factor / conc
    if (decode_factor, prefill_factor) != (1.0, 1.0):
        notes.append(_calibration_note(decode_factor, prefill_factor))
    # llama-server puts the other slots' prompt tokens in the same batches as the generating tokens: in a closed
    # loop each of the other conc - 1 slots prompts once per request, so a request's output_len - 1 steps carry
    # about conc - 1 prompts (was (conc - 1) / conc of one: 16x too few at 16 slots, against the --rate model).
    tpot = step + (conc - 1) * t_prompt / max(output_len - 1, 1) if conc > 1 else step
    ttft = t_prompt + (0.5 * step if conc > 1 else 0.0)
    e2e = ttft + (output_len - 1) * tpot
    regime = "cpu-generation" if (output_len - 1) * tpot >= ttft else "cpu-prompt"
    requests_per_s = conc / e2e if e2e else 0.0
    if conc > 1 and output_len > 1 and step <= conc * per_token * (1.0 + 1e-9):
        # compute-bound steps: e2e = conc x (t_prompt + (output_len - 1/2) x per_token), the server's capacity
        # whatever the slots; one expression, so that equal capacities compare equal (the planner's bisection).
        requests_per_s = 1.0 / (t_prompt + (output_len - 0.5) * per_token)
    wait = queue_wait_s(concurrency or 0, conc, e2e)
    ttft, e2e = ttft + wait, e2e + wait
    return Estimate(
        fits=True, reason=None, engine="llama.cpp", precision=mem.precision, kv_cache_dtype="fp16", tp=1, pp=1,
        nodes=1, concurrency=conc, weights_gib_per_gpu=mem.weights_gib_per_gpu,
        kv_cache_bytes_per_token=mem.kv_cache_bytes_per_token, kv_cache_gib_per_gpu=mem.kv_cache_gib_per_gpu,
        kv_cache_capacity_tokens=mem.kv_cache_capacity_tokens, overhead_gib_per_gpu=mem.overhead_gib_per_gpu,
        max_concurrency=max_conc, max_model_len=mem.max_model_len, ttft_ms=ttft * 1e3, tpot_ms=tpot * 1e3,
        e2e_ms=e2e * 1e3, output_tokens_per_s=conc / tpot if tpot else 0.0,
        requests_per_s=requests_per_s, relative_uncertainty=relative_band(regime), regime=regime,
        notes=tuple(notes),
    )
