"""One replica under an arrival rate: estimate()'s memory answer plus the open-loop load model (load.py).

vLLM: the step function of performance.py and the scheduler limits (the plan's flags, or `vllm serve`'s defaults
for the GPU from performance.yaml). llama.cpp: llama-server's slots (--parallel) and --batch-size, which batch
the same way (generating slots first, then prompt tokens up to the batch size), timed by the CPU model. No SLO
policy here (search.py) and no printing (cli).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

from infragen.architecture import ModelArchitecture
from infragen.catalog.records import Accelerator
from infragen.errors import InputError
from infragen.sizing.constants import load_constants
from infragen.sizing.cpu_performance import ServerStepSetup, server_step_s
from infragen.sizing.estimate import (
    attention_flops_per_token_pair,
    cached_prompt_tokens,
    estimate,
    llama_cpp_cpu_setup,
    vllm_step_setup,
)
from infragen.sizing.load import LoadPoint, Scheduler, StepFn, capacity_per_s, serve_at_rate
from infragen.sizing.memory import max_sequences, param_groups, vllm_profile_tokens
from infragen.sizing.performance import (
    MANY_EXPERT_MOE_REGIME,
    first_token_s,
    steady_state,
    token_step_s,
)
from infragen.sizing.types import Estimate, Hardware
from infragen.sizing.uncertainty import relative_band
from infragen.units import GIB

#: llama-server's --batch-size default: the most tokens one step carries (common/common.h n_batch = 2048 in the
#: llama.cpp tree the pinned llama-cpp-python 0.3.36 sdist vendors, commit 0c1e5709).
LLAMA_SERVER_BATCH_SIZE = 2048


def vllm_default_scheduler(acc: Accelerator, memory_per_gpu_gib: float) -> tuple[int, int, str]:
    """(max_num_seqs, max_num_batched_tokens, source) `vllm serve` picks on this GPU when not told."""
    d = load_constants().vllm_scheduler_defaults
    for tier in d.tiers:
        if memory_per_gpu_gib >= tier.min_gpu_memory_gib and acc.id not in tier.except_gpus:
            return tier.max_num_seqs, tier.max_num_batched_tokens, f"vLLM {d.engine_version} defaults"
    raise InputError(f"no vLLM batch-default tier matches {acc.id}")  # the last tier has no minimum: data error


@dataclass(frozen=True)
class LoadModel:
    """A fitted replica ready to be asked about arrival rates."""

    base: Estimate
    """estimate() at the largest batch: memory, max_concurrency (the KV-limited slots), notes."""
    step: StepFn
    scheduler: Scheduler
    scheduler_source: str
    input_len: int
    output_len: int
    _regime_setup: object
    decode_factor: float = 1.0
    prefill_factor: float = 1.0
    first_token_s: float = 0.0
    """The serving path's fixed part of TTFT (vLLM: performance.yaml first_token_overhead_ms; llama.cpp: 0)."""

    def slowed(self, factor: float) -> LoadModel:
        """The same replica with every step `factor` times longer (the planner's confidence margin)."""
        step = _step_fn(self._regime_setup, self.decode_factor, self.prefill_factor, factor)
        return replace(self, step=step)

    def at(self, rate_per_s: float, quantiles: tuple[float, ...] = (0.5, 0.9, 0.99)) -> LoadPoint:
        return _served(self.step, rate_per_s, self.input_len, self.output_len, self.scheduler, quantiles,
                       self.first_token_s)

    def capacity_per_s(self) -> float:
        return _capacity(self.step, self.input_len, self.output_len, self.scheduler)

    def regime(self, running_batch: float) -> str:
        """The error regime at this running batch (what the uncertainty band and quantiles are read for)."""
        if isinstance(self._regime_setup, ServerStepSetup):
            return self.base.regime  # llama.cpp: cpu-generation or cpu-prompt, from the request's shape
        if self.base.regime in ("gpu-multi-node", MANY_EXPERT_MOE_REGIME):
            return self.base.regime
        bound = steady_state(self._regime_setup, self.input_len, self.output_len,  # type: ignore[arg-type]
                             max(1, round(running_batch))).compute_bound
        return "gpu-decode-compute-bound" if bound else "gpu-decode-memory-bound"


@lru_cache(maxsize=16384)
def _served(step: StepFn, rate_per_s: float, input_len: int, output_len: int, sched: Scheduler,
            quantiles: tuple[float, ...], first_token_s: float = 0.0) -> LoadPoint:
    """serve_at_rate, remembered: it reads nothing but these (the step function is keyed on the constants in force,
    _step_fn), and load models that differ only in what it does not read (an estimate's memory figures, when the
    slots come out the same) ask the same rates: an eighth of light-api's first plan's points."""
    return serve_at_rate(step, rate_per_s, input_len, output_len, sched, quantiles=quantiles,
                         first_token_s=first_token_s)


@lru_cache(maxsize=1024)
def _capacity(step: StepFn, input_len: int, output_len: int, sched: Scheduler) -> float:
    return capacity_per_s(step, input_len, output_len, sched)


def prepare_load(
    model: ModelArchitecture, hardware: Hardware, *, precision: str, kv_cache_dtype: str = "auto", tp: int = 1,
    pp: int = 1, nodes: int = 1, input_len: int, output_len: int, max_model_len: int | None = None,
    gpu_memory_utilization: float = 0.9, max_num_seqs: int | None = None, max_num_batched_tokens: int | None = None,
    plan_flags: bool = False, decode_factor: float = 1.0, prefill_factor: float = 1.0,
    prefix_cache_hit_rate: float = 0.0, base: Estimate | None = None, serving_overhead_ms: float | None = None,
) -> LoadModel | Estimate:
    """The load model of one vLLM replica, or estimate()'s answer when it does not fit.

    Scheduler limits: the given ones; else with `plan_flags` what infragen's plans render (engine_args:
    --max-num-batched-tokens = the profile batch, --max-num-seqs = the slots); else `vllm serve`'s defaults.
    `base`: estimate()'s answer to this same question (concurrency None, these arguments) when the caller has it
    (the search's largest-batch estimate), so it is not asked twice. `serving_overhead_ms`: a calibration's measured
    serving path in place of the engine's default (estimate()).
    """
    if base is None:
        base = estimate(model, hardware, precision=precision, kv_cache_dtype=kv_cache_dtype, engine="vllm", tp=tp,
                        pp=pp, nodes=nodes, input_len=input_len, output_len=output_len, concurrency=None,
                        max_model_len=max_model_len, gpu_memory_utilization=gpu_memory_utilization,
                        decode_factor=decode_factor, prefill_factor=prefill_factor,
                        prefix_cache_hit_rate=prefix_cache_hit_rate, serving_overhead_ms=serving_overhead_ms)
    if not base.fits:
        return base
    acc = hardware.accelerator
    assert acc is not None  # estimate() refuses vLLM without GPUs
    c = load_constants()
    kv_slots = max_sequences(model, base.kv_cache_capacity_tokens, input_len + output_len,
                             c.vllm_memory.block_size_tokens)
    if plan_flags:
        seqs, budget = base.max_concurrency, vllm_profile_tokens(model, max_model_len)
        source = "infragen's plan flags"
    else:
        seqs, budget, source = vllm_default_scheduler(acc, hardware.memory_per_gpu_gib)
    seqs = max_num_seqs or seqs
    budget = max_num_batched_tokens or budget
    if seqs < 1 or budget < 1:
        raise InputError(f"max_num_seqs and max_num_batched_tokens must be >= 1 (got {seqs}, {budget})")
    slots = min(seqs, kv_slots)
    setup = vllm_step_setup(model, hardware, precision, base.kv_cache_dtype, tp, pp, nodes, gpu_memory_utilization,
                            max_model_len)
    notes = list(base.notes)
    if slots < seqs:
        notes.append(f"the KV cache holds {slots} requests of {input_len} + {output_len} tokens "
                     f"(max_num_seqs {seqs})")
    cached = cached_prompt_tokens(input_len, prefix_cache_hit_rate, c.vllm_memory.block_size_tokens)
    return LoadModel(replace(base, notes=tuple(notes)), _step_fn(setup, decode_factor, prefill_factor),
                     Scheduler(slots, budget, cached), source, input_len, output_len, setup, decode_factor,
                     prefill_factor,
                     first_token_s(setup) if serving_overhead_ms is None else serving_overhead_ms * 1e-3)


def prepare_llama_cpp_load(
    model: ModelArchitecture, hardware: Hardware, *, precision: str, input_len: int, output_len: int,
    max_model_len: int | None = None, parallel: int | None = None, batch_size: int | None = None,
    decode_factor: float = 1.0, prefill_factor: float = 1.0,
) -> LoadModel | Estimate:
    """The load model of one llama-server on a CPU host, or estimate()'s answer when it does not fit.

    Slots: `parallel`, else what infragen's plans render (--parallel = the slots the RAM holds, at most
    LLAMA_CPP_MAX_SLOTS); a larger `parallel` than the RAM holds is cut to what it holds. Token budget:
    `batch_size`, else llama-server's default.
    """
    base = estimate(model, hardware, precision=precision, engine="llama.cpp", input_len=input_len,
                    output_len=output_len, concurrency=None, max_model_len=max_model_len,
                    decode_factor=decode_factor, prefill_factor=prefill_factor)
    if not base.fits:
        return base
    slots = parallel or base.max_concurrency
    budget = batch_size or LLAMA_SERVER_BATCH_SIZE
    if slots < 1 or budget < 1:
        raise InputError(f"--parallel and --batch-size must be >= 1 (got {slots}, {budget})")
    notes = list(base.notes)
    if slots > base.max_concurrency:
        notes.append(f"the RAM holds the KV cache of {base.max_concurrency} slots of {input_len} + {output_len} "
                     f"tokens (--parallel {slots} asked)")
        slots = base.max_concurrency
    source = ("llama-server: --parallel " + ("as given" if parallel else "as infragen's plans render it")
              + ", --batch-size " + ("as given" if batch_size else "its default"))
    setup = ServerStepSetup(llama_cpp_cpu_setup(hardware), base.weights_gib_per_gpu * GIB,
                            float(param_groups(model).active()), float(base.kv_cache_bytes_per_token),
                            attention_flops_per_token_pair(model), base.precision)
    return LoadModel(replace(base, notes=tuple(notes)), _step_fn(setup, decode_factor, prefill_factor),
                     Scheduler(slots, budget), source, input_len, output_len, setup, decode_factor, prefill_factor)


#: Step times one step function remembers (light-api's first plan asks 26,184 steps, 8,668 distinct, in all).
STEP_MEMO_SIZE = 4096


class _Same:
    """Hashes and compares by identity (the constants are a pydantic model: not hashable), keeping it alive."""

    __slots__ = ("obj",)

    def __init__(self, obj: object) -> None:
        self.obj = obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Same) and other.obj is self.obj


def _step_fn(setup: object, decode_factor: float, prefill_factor: float, slowdown: float = 1.0) -> StepFn:
    """token_step_s of the setup, its decode part and its prompt part scaled by a calibration profile's factors,
    the whole step by `slowdown`. Cached so that equal setups share one function (capacity is cached on it).

    The function remembers its answers: the load model asks the same steps again and again (a batch's decode and
    prompt steps do not depend on the arrival rate; the capacity search and each rate's solve start at full and
    empty slots): two asks in three in light-api's first plan. Same arguments, same float: no result moves. The
    step model reads the constants when it runs, so the functions are keyed on the constants in force too (a fit's
    override gets fresh ones)."""
    return _step_fn_for(setup, decode_factor, prefill_factor, slowdown, _Same(load_constants()))


@lru_cache(maxsize=1024)
def _step_fn_for(setup: object, decode_factor: float, prefill_factor: float, slowdown: float,
                 _constants: _Same) -> StepFn:
    timed = server_step_s if isinstance(setup, ServerStepSetup) else token_step_s

    @lru_cache(maxsize=STEP_MEMO_SIZE)
    def step(n: float, ctx: float, p: float, pctx: float) -> float:
        full = timed(setup, n, ctx, p, pctx)  # type: ignore[arg-type]
        if decode_factor == 1.0 and prefill_factor == 1.0:
            return full * slowdown
        decode = timed(setup, n, ctx, 0.0, 0.0)  # type: ignore[arg-type]
        return (decode / decode_factor + (full - decode) / prefill_factor) * slowdown

    return step


def band_for(load: LoadModel, point: LoadPoint) -> tuple[str, float]:
    """(regime, relative band) of a load point."""
    regime = load.regime(point.running_batch)
    return regime, relative_band(regime)
