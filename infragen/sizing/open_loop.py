"""Open-loop sizing of one vLLM layout or llama-server: the largest per-replica arrival rate whose TTFT p99, TPOT and
E2E p99 meet the SLOs at the workload's confidence (the load model, load.py), and the fewest replicas for the peak.

No search over layouts and no pricing (search.py); pure and cached on hashable inputs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache

from infragen.architecture import ModelArchitecture
from infragen.sizing.load import LoadPoint
from infragen.sizing.load_estimate import LoadModel, prepare_llama_cpp_load, prepare_load
from infragen.sizing.types import Estimate, Hardware
from infragen.sizing.uncertainty import latency_factor, relative_band
from infragen.spec import WorkloadSpec

#: How a layout that misses the SLOs even at a trickle is rejected (explain.py's SLO advice looks for it).
TRICKLE_PREFIX = "at a trickle of requests"
#: Share of the saturation rate the trickle check uses (the lowest latency a replica reaches under load).
TRICKLE = 1e-3
#: Bisection steps on the per-replica rate (to 2^-10 of the saturation rate; the replica count is then checked
#: one below, so a coarser rate never costs a replica).
RATE_STEPS = 10
#: Batch slots the plan renders (max_num_seqs): the running batch at the SLO rate (slowed model) plus this many
#: standard deviations of a Poisson count (M/G/inf: mean = variance), so all slots are busy under 0.1 % of the time
#: and the slot wait stays out of TTFT p99, while the KV cache keeps room for a long request (context.py).
SLOT_HEADROOM_SD = 3.09
#: Without any SLO, the highest share of the saturation rate the plan lets a replica carry (queues stay finite;
#: policy choice, as sizing/queueing.RHO_MAX for the other paths).
NO_SLO_UTILISATION = 0.8


@dataclass(frozen=True)
class OpenLoopSizing:
    estimate: Estimate | None
    """The model's estimate at the peak's per-replica rate (requests_per_s: the SLO rate per replica)."""
    replicas: int
    slots: int
    """Batch slots (the plan's max_num_seqs)."""
    rejected: str | None
    miss: float
    factor: float
    """Latency factor the SLOs were checked with (slo_confidence)."""
    trickle_ms: tuple[float, float, float] | None = None
    """(TTFT p99, TPOT, E2E p99) at a trickle of requests, every step slowed by the factor: the least each SLO
    could be (what the infeasible advice relaxes them to)."""


Slo = tuple[float | None, float | None, float | None]


def slo_miss(slo: Slo, point: LoadPoint) -> tuple[float, str | None]:
    """(largest latency / SLO ratio, the first SLO missed and by what) of one load point (already inflated)."""
    if not point.stable:
        return math.inf, "the rate exceeds what one replica serves (the queue grows without bound)"
    worst, why = 0.0, None
    for name, target, value_s in (("TTFT p99", slo[0], point.ttft_p99_s), ("TPOT", slo[1], point.tpot_s),
                                  ("E2E p99", slo[2], point.e2e_p99_s)):
        if target is None:
            continue
        ratio = value_s * 1e3 / target
        if ratio > worst:
            worst = ratio
            if ratio > 1.0:
                why = f"{name} {value_s * 1e3:,.1f} ms exceeds the {target:g} ms SLO"
    return worst, why


def slo_met(slo: Slo, point: LoadPoint, output_len: int) -> bool:
    """Whether a load point meets `slo` (TTFT/E2E p99 through the TTFT CDF: no percentile search)."""
    if not point.stable:
        return False
    if slo[1] is not None and point.tpot_s * 1e3 > slo[1]:
        return False
    if slo[0] is not None and point.ttft_cdf(slo[0] / 1e3) < 0.99:
        return False
    return slo[2] is None or point.ttft_cdf(slo[2] / 1e3 - (output_len - 1) * point.tpot_s) >= 0.99


def point_at(load: LoadModel, rate_per_s: float) -> LoadPoint:
    """load.at(rate) without TTFT quantiles (the SLO checks read the CDF), remembered (load_estimate._served): the
    replica count and the batch slots ask again at rates the SLO bisection already evaluated, and load models with
    the same step function, scheduler and request shape recur across a search."""
    return load.at(rate_per_s, quantiles=())


@lru_cache(maxsize=4096)
def slo_rate(load: LoadModel, slo: Slo) -> tuple[float, float, str | None, tuple[float, float, float] | None]:
    """(largest per-replica rate meeting `slo`, miss at a trickle, why not, the trickle's TTFT p99 / TPOT / E2E p99
    in ms) for a load model already slowed by the confidence factor; rate 0 when even a trickle misses."""
    cap = load.capacity_per_s()
    if cap <= 0:
        return 0.0, math.inf, "not one request fits the batch", None
    trickle = load.at(cap * TRICKLE, quantiles=(0.99,))
    trickle_ms = (trickle.ttft_p99_s * 1e3, trickle.tpot_s * 1e3, trickle.e2e_p99_s * 1e3)
    miss, why = slo_miss(slo, trickle)
    if miss > 1.0:
        return 0.0, miss, why, trickle_ms
    if slo == (None, None, None):
        return NO_SLO_UTILISATION * cap, miss, None, trickle_ms
    lo, hi = cap * TRICKLE, cap
    for _ in range(RATE_STEPS):
        mid = (lo + hi) / 2.0
        if slo_met(slo, point_at(load, mid), load.output_len):
            lo = mid
        else:
            hi = mid
    return lo, miss, None, trickle_ms


def size_open_loop(spec: WorkloadSpec, model: ModelArchitecture, hw: Hardware, *, precision: str, tp: int, pp: int,
                   nodes: int, max_model_len: int, regime: str, base: Estimate | None = None,
                   engine: str = "vllm", decode_factor: float = 1.0, prefill_factor: float = 1.0,
                   serving_overhead_ms: float | None = None) -> OpenLoopSizing:
    """Replicas for traffic.peak_requests_per_s. The confidence factor is that of the regime at the peak's running
    batch: first guessed from `regime` (the layout at its largest batch), sized again when the peak's differs.

    llama.cpp: llama-server with the slots the plan renders at most (what the RAM holds, up to 16) and its default
    --batch-size, as `estimate --rate` models it; the plan's --parallel is then the slots the SLO rate needs.
    decode_factor/prefill_factor (and vLLM's serving_overhead_ms): a calibration profile's, as `estimate --rate
    --calibration` applies them."""
    t = spec.traffic
    assert t.peak_requests_per_s is not None
    if engine == "llama.cpp":
        load = prepare_llama_cpp_load(model, hw, precision=precision, input_len=t.prompt_tokens,
                                      output_len=t.output_tokens, max_model_len=max_model_len,
                                      decode_factor=decode_factor, prefill_factor=prefill_factor)
    else:
        load = prepare_load(model, hw, precision=precision, kv_cache_dtype=spec.kv_cache_dtype, tp=tp, pp=pp,
                            nodes=nodes, input_len=t.prompt_tokens, output_len=t.output_tokens,
                            max_model_len=max_model_len, plan_flags=True,
                            prefix_cache_hit_rate=t.prefix_cache_hit_rate, base=base,
                            decode_factor=decode_factor, prefill_factor=prefill_factor,
                            serving_overhead_ms=serving_overhead_ms)
    if not isinstance(load, LoadModel):
        return OpenLoopSizing(None, 0, 0, load.reason or "does not fit", math.inf, 1.0)
    factor = latency_factor(regime, spec.slo_confidence)
    sized = _size_with(spec, load, factor)
    if sized.estimate is not None:
        at_peak = latency_factor(sized.estimate.regime, spec.slo_confidence)
        if at_peak != factor:
            again = _size_with(spec, load, at_peak)
            if again.estimate is not None and latency_factor(again.estimate.regime, spec.slo_confidence) == at_peak:
                return again
            # the two regimes disagree at their own peaks: keep the larger factor (the safer sizing)
            return again if at_peak > factor else sized
    return sized


def _size_with(spec: WorkloadSpec, load: LoadModel, factor: float) -> OpenLoopSizing:
    t = spec.traffic
    assert t.peak_requests_per_s is not None
    slow = load.slowed(factor)
    slo: Slo = (spec.slo.ttft_p99_ms, spec.slo.tpot_ms, spec.slo.e2e_p99_ms)
    rate, miss, why, trickle_ms = slo_rate(slow, slo)
    if rate <= 0:
        conf = f" (x{factor:.2f} for {spec.slo_confidence} confidence)" if factor != 1.0 else ""
        return OpenLoopSizing(None, 0, load.scheduler.slots, f"{TRICKLE_PREFIX}: {why}{conf}", miss, factor,
                              trickle_ms)
    peak = t.peak_requests_per_s
    replicas = max(spec.min_replicas, math.ceil(peak / rate - 1e-9))
    # The bisection keeps a rate that meets the SLOs (to 2^-RATE_STEPS of the saturation rate); one or two
    # replicas fewer may still meet them at the boundary. Without SLOs the utilisation cap is the rule.
    for _ in range(2 if slo != (None, None, None) else 0):
        if replicas <= spec.min_replicas or not slo_met(slo, point_at(slow, peak / (replicas - 1)),
                                                        t.output_tokens):
            break
        replicas -= 1
    n_star = point_at(slow, rate).running_batch  # the bisection's last kept point: from the table
    slots = min(load.scheduler.slots, math.ceil(n_star + SLOT_HEADROOM_SD * math.sqrt(n_star)) + 1)
    return OpenLoopSizing(_estimate_at(load, peak / replicas, rate, factor), replicas, slots, None, 1.0, factor)


@lru_cache(maxsize=4096)
def _estimate_at(load: LoadModel, rate_per_s: float, slo_rate_per_s: float, factor: float) -> Estimate:
    """The estimate at the peak's per-replica rate (cached: instance types sharing a GPU share the answer)."""
    return _estimate_from(load, load.at(rate_per_s, quantiles=(0.5, 0.99)), slo_rate_per_s, factor)


def _estimate_from(load: LoadModel, point: LoadPoint, slo_rate_per_s: float, factor: float) -> Estimate:
    """estimate()'s record filled from a load point: means for ttft/e2e, percentiles beside them."""
    regime = load.regime(point.running_batch)
    return replace(
        load.base, concurrency=max(1, round(point.running_batch)), ttft_ms=point.ttft_mean_s * 1e3,
        tpot_ms=point.tpot_s * 1e3, e2e_ms=point.e2e_mean_s * 1e3,
        output_tokens_per_s=point.rate_per_s * load.output_len, requests_per_s=slo_rate_per_s,
        relative_uncertainty=relative_band(regime), regime=regime, ttft_p50_ms=point.ttft_p50_s * 1e3,
        ttft_p99_ms=point.ttft_p99_s * 1e3, e2e_p99_ms=point.e2e_p99_s * 1e3,
        running_batch=point.running_batch, utilisation=point.utilisation, latency_factor=factor,
    )
