"""A finite benchmark replayed: every request queued at once (`vllm bench serve` without --request-rate) and the
batch drained, or a closed loop of --max-concurrency clients, as performance.simulate_drain steps it under the
server's scheduler limits.

A burst of long-tailed requests spends most of its steps far below the full batch, and a closed loop of a finite
set of requests ends in such a tail too, so neither run's throughput is the steady state's; `infragen calibrate`
and benchmarks/accuracy.py compare those results with this replay.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from infragen.architecture import ModelArchitecture
from infragen.errors import InputError
from infragen.sizing.estimate import estimate, vllm_step_setup
from infragen.sizing.load_estimate import vllm_default_scheduler
from infragen.sizing.performance import DrainResult, simulate_drain
from infragen.sizing.types import Hardware


@dataclass(frozen=True)
class BurstReplay:
    """The replay and the limits it ran under."""

    result: DrainResult
    max_num_seqs: int
    max_num_batched_tokens: int
    kv_cache_capacity_tokens: int
    clients: int | None = None
    """The closed loop's in-flight requests; None for a burst."""

    @property
    def limits(self) -> str:
        loop = f"{self.clients} client{'s' if self.clients > 1 else ''}, " if self.clients else ""
        return f"{loop}max_num_seqs {self.max_num_seqs}, {self.max_num_batched_tokens} tokens a step"


def burst_drain(model: ModelArchitecture, hardware: Hardware, *, precision: str, tp: int,
                input_lens: Sequence[int], output_lens: Sequence[int], pp: int = 1, kv_cache_dtype: str = "auto",
                max_model_len: int | None = None, gpu_memory_utilization: float = 0.9,
                expert_parallel: bool = False, max_num_seqs: int | None = None,
                max_num_batched_tokens: int | None = None, clients: int | None = None) -> BurstReplay:
    """vLLM serving `input_lens` / `output_lens` (in the order sent) all queued at once on one engine of `hardware`,
    or with `clients` a closed loop of that many requests in flight (`vllm bench serve --max-concurrency`).

    The scheduler limits default to what `vllm serve` of the pinned release picks on the GPU
    (load_estimate.vllm_default_scheduler); the KV capacity is the one estimate() sizes. InputError when the setup
    does not fit or the lists are empty or of different lengths."""
    if not input_lens or len(input_lens) != len(output_lens):
        raise InputError(f"a burst needs one input and one output length per request (got {len(input_lens)} and "
                         f"{len(output_lens)})")
    if clients is not None and clients < 1:
        raise InputError(f"a closed loop needs at least one client (got {clients})")
    if hardware.accelerator is None:
        raise InputError(f"{hardware.name}: a vLLM burst needs a machine with GPUs")
    mean_in = max(1, round(sum(input_lens) / len(input_lens)))
    mean_out = max(1, round(sum(output_lens) / len(output_lens)))
    est = estimate(model, hardware, precision=precision, kv_cache_dtype=kv_cache_dtype, tp=tp, pp=pp,
                   input_len=mean_in, output_len=mean_out, concurrency=None, max_model_len=max_model_len,
                   gpu_memory_utilization=gpu_memory_utilization, expert_parallel=expert_parallel)
    if not est.fits:
        raise InputError(f"the model says this setup does not fit ({est.reason})")
    seqs, budget, _ = vllm_default_scheduler(hardware.accelerator, hardware.memory_per_gpu_gib)
    seqs, budget = max_num_seqs or seqs, max_num_batched_tokens or budget
    setup = vllm_step_setup(model, hardware, precision, est.kv_cache_dtype, tp, pp, 1, gpu_memory_utilization,
                            max_model_len, expert_parallel=est.expert_parallel)
    result = simulate_drain(setup, input_lens, output_lens, seqs, est.kv_cache_capacity_tokens, budget, clients)
    return BurstReplay(result, seqs, budget, est.kv_cache_capacity_tokens, clients)


def completed_lengths(doc: dict[str, Any], where: str) -> tuple[list[int], list[int]] | None:
    """(input lengths, output lengths) of the requests that completed, in the order sent, when the result holds
    them (`--save-detailed`: input_lens, output_lens; a failed request has output 0); None when it does not."""
    if "input_lens" not in doc and "output_lens" not in doc:
        return None
    ins, outs = doc.get("input_lens"), doc.get("output_lens")
    ok = (isinstance(ins, list) and isinstance(outs, list) and len(ins) == len(outs) and ins
          and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in (*ins, *outs)))
    if not ok:
        raise InputError(f"{where}: input_lens, output_lens: expected two lists of token counts (integers >= 0) of "
                         "the same length, one entry a request, as `vllm bench serve --save-detailed` writes them")
    done = [(i, o) for i, o in zip(ins, outs, strict=True) if o > 0]  # type: ignore[arg-type]
    if not done:
        raise InputError(f"{where}: output_lens: no request generated a token, nothing to calibrate on")
    return [max(1, i) for i, _ in done], [o for _, o in done]
