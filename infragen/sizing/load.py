"""Open-loop load model: one replica receiving Poisson arrivals, served by continuous batching with chunked prefill.

Pure arithmetic on a step-time function (performance.token_step_s for vLLM); knows nothing of GPUs, SLOs or
replicas. The running batch is the fixed point of Little's law, TTFT percentiles come from the queueing terms.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

#: step_s(decode_seqs, decode_ctx_tokens, prefill_tokens, prefill_ctx_tokens) -> seconds of one engine step.
StepFn = Callable[[float, float, float, float], float]

#: Squared coefficient of variation of the time a request holds a batch slot. Requests of one workload still
#: differ in output length; 1.0 is an exponential spread (ShareGPT-like outputs), the conservative choice
#: for the Allen-Cunneen M/G/c correction (assumption, not a measurement).
SLOT_SERVICE_CV2 = 1.0
#: Prompts of a workload are taken as one length: deterministic prefill work (M/D/1 for the token budget).
PREFILL_SERVICE_CV2 = 0.0


@dataclass(frozen=True)
class Scheduler:
    """The engine's batching limits for one replica."""

    slots: int
    """Requests that can run at once: max_num_seqs, or fewer when the KV cache holds fewer."""
    max_num_batched_tokens: int
    """Tokens one step may carry (decode tokens count one each; prefill chunks fill the rest)."""
    cached_prompt_tokens: int = 0
    """Prompt tokens found in the prefix cache: not computed, but attended by the rest and by decode."""


@dataclass(frozen=True)
class LoadPoint:
    """One replica at one arrival rate (every time in seconds)."""

    rate_per_s: float
    stable: bool
    """False when the rate exceeds capacity: the queue grows without bound and the latencies are meaningless."""
    running_batch: float
    """Mean requests holding a batch slot (prefilling or decoding): n = rate x time in the batch."""
    slot_utilisation: float
    """running_batch / slots."""
    prefill_utilisation: float
    """Share of the step token budget the arriving prompts need."""
    prefill_tokens_per_step: float
    """Mean prompt tokens a step carries (chunked prefill mixed into decode steps)."""
    tpot_s: float
    """Mean step time with the running batch decoding and the arriving prompts' chunks mixed in."""
    prefill_service_s: float
    """Steps that carry a request's own prompt, up to its first token (no waiting)."""
    slot_wait_probability: float
    """Erlang C: probability an arrival finds every slot taken."""
    ttft_mean_s: float
    ttft_p50_s: float
    ttft_p90_s: float
    ttft_p99_s: float
    e2e_mean_s: float
    e2e_p99_s: float
    """TTFT p99 plus the output's decode steps (the workload's output length is one figure)."""
    cdf_terms: tuple[float, float, float, tuple[tuple[float, float], ...]] | None = None
    """(own prefill + the serving path's fixed delay, busy share, decode step, waits): what ttft_cdf needs; None
    when unstable."""

    def ttft_cdf(self, t_s: float) -> float:
        """P(TTFT <= t_s): one evaluation, where a percentile needs a search (the planner's SLO test)."""
        if self.cdf_terms is None:
            return 0.0
        s_pf, busy, tau, waits = self.cdf_terms
        return _ttft_cdf(t_s, s_pf, busy, tau, waits)

    @property
    def utilisation(self) -> float:
        return max(self.slot_utilisation, self.prefill_utilisation)

    def ttft_quantile_s(self, q: float) -> float:
        return {0.5: self.ttft_p50_s, 0.9: self.ttft_p90_s, 0.99: self.ttft_p99_s}[q]


class _Steady(NamedTuple):  # a tuple: the solves build thousands (a frozen dataclass's init costs more)
    n: float
    tpot: float
    """Mean time between a decoding request's tokens: decode-only steps and the steps that carry a prompt chunk."""
    tau_decode: float
    tau_chunk: float
    chunks: int
    prefill_busy: float
    """Share of time spent in steps that carry a prompt chunk (the token budget's utilisation)."""
    s_pf: float
    wait_pf: float
    time_in_batch: float


def _steady(step: StepFn, rate: float, n: float, input_len: int, output_len: int, budget: int,
            cached: int = 0) -> _Steady:
    """Step times and time in the batch when `n` requests hold slots at arrival rate `rate`.

    Prompts arrive whole, so a step carries either no prompt or a chunk of one (up to the budget left after the
    decode tokens): prefill is lumpy, and the decode tokens riding in a chunk's step wait for its compute. A prompt
    needs `chunks` such steps, `prefill_busy` = rate x chunks x tau_chunk of the time; every step advances each
    running request by one token, so a request's decode time is its own decode steps plus the extra length of
    the chunk steps of the prompts that arrive (or wait) meanwhile.
    """
    ctx = input_len + output_len / 2.0
    room = max(budget - n, 1.0)
    new = input_len - cached  # prefix-cached tokens are attended, not computed
    chunks = math.ceil(new / room)
    tau_d = step(n, ctx, 0.0, 0.0)
    tau_c = step(n, ctx, new / chunks, cached + new / 2.0)
    busy = rate * chunks * tau_c
    s_pf = chunks * tau_c
    if busy >= 1.0:
        return _Steady(n, math.inf, tau_d, tau_c, chunks, busy, s_pf, math.inf, math.inf)
    # Prompt steps queue one after the other (M/D/1 on the token budget): the mean wait before a prompt's first
    # chunk, and the prompts a request leaves queued behind its own when it starts decoding (mean number in an
    # M/D/1 system), whose steps its first tokens ride in.
    wait_pf = busy * s_pf / (2.0 * (1.0 - busy))
    left_behind = busy + busy * busy / (2.0 * (1.0 - busy))
    extra = chunks * (tau_c - tau_d)
    # Each prompt arriving while this request decodes adds `extra`; so does each one queued when it starts.
    decode_s = ((output_len - 1) * tau_d + left_behind * extra) / max(1.0 - rate * extra, 1e-9)
    tpot = decode_s / max(output_len - 1, 1) if output_len > 1 else tau_d / max(1.0 - rate * extra, 1e-9)
    return _Steady(n, tpot, tau_d, tau_c, chunks, busy, s_pf, wait_pf, wait_pf + s_pf + decode_s)


def _gap_fn(step: StepFn, rate: float, input_len: int, output_len: int, budget: int,
            cached: int) -> Callable[[float], float]:
    """n -> rate x time_in_batch(n) - n, or inf when prompt steps take all the time: _steady's arithmetic in the
    same order (the same floats, tests/sizing/test_load_fast.py) without building its state, as the solves ask
    for the gap alone, thousands of times per plan."""
    ctx = input_len + output_len / 2.0
    new = input_len - cached
    pctx = cached + new / 2.0
    decode_steps = output_len - 1
    ceil, inf = math.ceil, math.inf

    def gap(n: float) -> float:
        room = budget - n
        if room < 1.0:  # max(budget - n, 1.0)
            room = 1.0
        chunks = ceil(new / room)
        tau_d = step(n, ctx, 0.0, 0.0)
        tau_c = step(n, ctx, new / chunks, pctx)
        busy = rate * chunks * tau_c
        if busy >= 1.0:
            return inf
        s_pf = chunks * tau_c
        idle2 = 2.0 * (1.0 - busy)
        extra = chunks * (tau_c - tau_d)
        slack = 1.0 - rate * extra
        if slack < 1e-9:  # max(1.0 - rate * extra, 1e-9)
            slack = 1e-9
        decode_s = (decode_steps * tau_d + (busy + busy * busy / idle2) * extra) / slack
        return rate * (busy * s_pf / idle2 + s_pf + decode_s) - n

    return gap


def _upper(gap: Callable[[float], float], slots: int) -> tuple[float, float] | None:
    """(n, gap(n)) with gap(n) <= 0 to start the root search from: full slots, or, when those are not stable (prompt
    steps saturate as the budget left for prompts shrinks) while a smaller batch may be, halved up to 8 times;
    None when none is (the rate is over capacity)."""
    hi = float(slots)
    g_hi = gap(hi)
    if g_hi > 0:
        for _ in range(8):
            hi /= 2.0
            g_hi = gap(hi)
            if g_hi <= 0:
                break
        else:
            return None
    return hi, g_hi


def _little(step: StepFn, rate: float, input_len: int, output_len: int, sched: Scheduler) -> _Steady | None:
    """Smallest n with n = rate x time_in_batch(n) below the slots, or None when none (over capacity)."""
    budget = sched.max_num_batched_tokens
    gap = _gap_fn(step, rate, input_len, output_len, budget, sched.cached_prompt_tokens)
    upper = _upper(gap, sched.slots)
    if upper is None:
        return None
    hi, g_hi = upper
    lo, g_lo = 0.0, gap(0.0)
    # time_in_batch grows about linearly with n: one crossing, found by regula falsi (Illinois) to 0.1 %,
    # a few evaluations where bisection takes a dozen (the planner asks thousands of times).
    side = 0
    n = hi
    for _ in range(60):
        n = (lo + hi) / 2.0 if math.isinf(g_hi) else (lo * g_hi - hi * g_lo) / (g_hi - g_lo)
        g = gap(n)
        if g > 0:
            lo, g_lo = n, g
            if side == -1:
                g_hi /= 2.0
            side = -1
        else:
            hi, g_hi = n, g
            if side == 1:
                g_lo /= 2.0
            side = 1
        if hi - lo <= 1e-3 * max(hi, 1e-3) or abs(g) <= 1e-4 * max(n, 1e-3):
            break
    return _steady(step, rate, n, input_len, output_len, budget, sched.cached_prompt_tokens)


def erlang_c(servers: int, offered: float) -> float:
    """Probability of waiting in M/M/c with `servers` and offered load `offered` (< servers); stable recursion."""
    if offered <= 0:
        return 0.0
    if offered >= servers:
        return 1.0
    b = 1.0
    for k in _FLOAT_COUNTS[1:servers + 1] if servers < len(_FLOAT_COUNTS) else map(float, range(1, servers + 1)):
        ob = offered * b  # the same product twice: once
        b = ob / (k + ob)  # k a float: the same sum as with the int k (exact below 2^53), without converting it
    return servers * b / (servers - offered * (1.0 - b))


#: 0.0, 1.0, 2.0 ...: erlang_c's server counts as floats (its recursion runs over up to max_num_seqs servers).
_FLOAT_COUNTS = tuple(float(k) for k in range(4097))


def _wait_cdf(x: float, waits: tuple[tuple[float, float], ...]) -> float:
    """P(sum of independent waits <= x); each wait is 0 with probability 1 - a, else exponential of mean theta."""
    if x < 0:
        return 0.0
    (a1, t1), (a2, t2) = waits
    if t1 > 0 and t2 > 0:  # each exponential once (the same floats as the general form below)
        e1, e2 = math.exp(-x / t1), math.exp(-x / t2)
        if abs(t1 - t2) <= 1e-9 * max(t1, t2, 1e-12):
            both = 1.0 - e1 * (1.0 + x / t1)
        else:
            both = 1.0 - (t1 * e1 - t2 * e2) / (t1 - t2)
        return (1 - a1) * (1 - a2) + a1 * (1 - a2) * (1.0 - e1) + (1 - a1) * a2 * (1.0 - e2) + a1 * a2 * both

    def exp_cdf(t: float) -> float:
        return 1.0 - math.exp(-x / t) if t > 0 else 1.0

    if abs(t1 - t2) <= 1e-9 * max(t1, t2, 1e-12):
        both = 1.0 - math.exp(-x / t1) * (1.0 + x / t1) if t1 > 0 else 1.0
    else:
        both = 1.0 - (t1 * math.exp(-x / t1) - t2 * math.exp(-x / t2)) / (t1 - t2)
    return (1 - a1) * (1 - a2) + a1 * (1 - a2) * exp_cdf(t1) + (1 - a1) * a2 * exp_cdf(t2) + a1 * a2 * both


#: Midpoints over which the residual of the step in progress (uniform on [0, tau]) is averaged.
_RESIDUAL_POINTS = 8


def _ttft_cdf(t: float, s_pf: float, busy: float, tau: float, waits: tuple[tuple[float, float], ...]) -> float:
    """P(TTFT <= t): own prefill steps + the step in progress (when busy) + waits for the token budget and a slot."""
    return _ttft_cdf_fn(s_pf, busy, tau, waits)(t)


def _ttft_cdf_fn(s_pf: float, busy: float, tau: float,
                 waits: tuple[tuple[float, float], ...]) -> Callable[[float], float]:
    """t -> P(TTFT <= t) = (1 - busy) W(x) + busy x mean of W(x - residual), x = t - s_pf, W = _wait_cdf: with the
    constants worked out once, as a percentile asks about a dozen times. When both waits have a positive mean
    (the planner's case) W is written out below with _wait_cdf's expressions in its order, so each value is the
    same float (tests/sizing/test_load_fast.py)."""
    (a1, t1), (a2, t2) = waits
    offsets = [(i + 0.5) / _RESIDUAL_POINTS * tau for i in range(_RESIDUAL_POINTS)]
    idle = 1.0 - busy
    if not (t1 > 0 and t2 > 0):
        def general(t: float) -> float:
            x = t - s_pf
            if x < 0:
                return 0.0
            residual = sum([_wait_cdf(x - off, waits) for off in offsets])
            return idle * _wait_cdf(x, waits) + busy * residual / _RESIDUAL_POINTS

        return general
    exp = math.exp
    c0, c1, c2, c3 = (1 - a1) * (1 - a2), a1 * (1 - a2), (1 - a1) * a2, a1 * a2
    same = abs(t1 - t2) <= 1e-9 * max(t1, t2, 1e-12)
    d = t1 - t2

    def cdf(t: float) -> float:
        x = t - s_pf
        if x < 0:
            return 0.0
        e1, e2 = exp(-x / t1), exp(-x / t2)
        both = 1.0 - e1 * (1.0 + x / t1) if same else 1.0 - (t1 * e1 - t2 * e2) / d
        w0 = c0 + c1 * (1.0 - e1) + c2 * (1.0 - e2) + c3 * both
        # The residual points summed left to right from 0.0 as sum() does; the offsets grow, so once one point
        # is below zero the rest are too (each adds 0.0, which leaves a sum of probabilities unchanged).
        residual = 0.0
        for off in offsets:
            y = x - off
            if y < 0:
                break
            e1, e2 = exp(-y / t1), exp(-y / t2)
            both = 1.0 - e1 * (1.0 + y / t1) if same else 1.0 - (t1 * e1 - t2 * e2) / d
            residual += c0 + c1 * (1.0 - e1) + c2 * (1.0 - e2) + c3 * both
        return idle * w0 + busy * residual / _RESIDUAL_POINTS

    return cdf


def _quantile(q: float, s_pf: float, tau: float, cdf: Callable[[float], float]) -> float:
    lo, hi = s_pf, s_pf + tau + 1e-9
    for _ in range(200):  # doubling: bounded, as the planner must never hang on an extreme input
        if cdf(hi) >= q:
            break
        hi = s_pf + 2.0 * (hi - s_pf)
    for _ in range(50):
        mid = (lo + hi) / 2.0
        if cdf(mid) < q:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-3 * hi:
            break
    return hi


def _remembered(f: Callable[[float], float]) -> Callable[[float], float]:
    """f with its answers kept: the percentiles of one point start their searches at the same times."""
    seen: dict[float, float] = {}

    def g(t: float) -> float:
        v = seen.get(t)
        if v is None:
            v = seen[t] = f(t)
        return v

    return g


def _unstable(rate: float, sched: Scheduler) -> LoadPoint:
    inf = math.inf
    return LoadPoint(rate, False, float(sched.slots), 1.0, 1.0, 0.0, inf, inf, 1.0, inf, inf, inf, inf, inf, inf)


def serve_at_rate(step: StepFn, rate_per_s: float, input_len: int, output_len: int, sched: Scheduler,
                  slot_service_cv2: float = SLOT_SERVICE_CV2,
                  quantiles: tuple[float, ...] = (0.5, 0.9, 0.99), first_token_s: float = 0.0) -> LoadPoint:
    """One replica under Poisson arrivals at `rate_per_s`: running batch, TPOT and TTFT percentiles.

    TTFT = own prefill steps + a wait for the prompt steps queued ahead (M/D/1: prompts served one after the
    other in chunk steps, which includes the rest of one in progress) + the rest of a decode step in progress +
    a wait for a batch slot (M/G/c, Erlang C with the Allen-Cunneen correction). Each wait is an atom at zero
    plus an exponential tail; the percentiles of the sum are solved from its CDF. `slot_service_cv2` is the
    squared coefficient of variation of the time a request holds a slot (0: every request the same length).
    Only the TTFT `quantiles` asked for are solved (the others are NaN): the planner needs p99 alone.
    `first_token_s` is the serving path outside the engine steps (HTTP, tokenisation, streaming): a fixed delay
    added to every request's TTFT that occupies no step.
    """
    if rate_per_s <= 0:
        raise ValueError("rate must be positive")
    st = _little(step, rate_per_s, input_len, output_len, sched)
    if st is None:
        return _unstable(rate_per_s, sched)
    rho_p = st.prefill_busy
    theta_p = st.s_pf * (1.0 + PREFILL_SERVICE_CV2) / (2.0 * (1.0 - rho_p))
    c = sched.slots
    p_wait = erlang_c(c, st.n)
    theta_s = st.time_in_batch / (c - st.n) * (1.0 + slot_service_cv2) / 2.0
    waits = ((rho_p, theta_p), (p_wait, theta_s))
    # An arrival finds a decode-only step running when the batch is not empty (M/G/inf: 1 - e^-n) and no prompt
    # step is in progress (those are in the M/D/1 wait).
    busy = (1.0 - math.exp(-st.n)) * (1.0 - rho_p)
    own = st.s_pf + first_token_s  # the fixed part of TTFT: the CDF below starts there
    mean = own + busy * st.tau_decode / 2.0 + rho_p * theta_p + p_wait * theta_s
    solved: dict[float, float] = {}
    if quantiles:
        cdf = _ttft_cdf_fn(own, busy, st.tau_decode, waits)
        if len(quantiles) > 1:
            cdf = _remembered(cdf)
        solved = {q: _quantile(q, own, st.tau_decode, cdf) for q in (0.5, 0.9, 0.99) if q in quantiles}
    p50, p90, p99 = (solved.get(q, math.nan) for q in (0.5, 0.9, 0.99))
    decode = (output_len - 1) * st.tpot
    return LoadPoint(
        rate_per_s=rate_per_s, stable=True, running_batch=st.n, slot_utilisation=st.n / c,
        prefill_utilisation=rho_p, prefill_tokens_per_step=rate_per_s * input_len * st.tpot, tpot_s=st.tpot,
        prefill_service_s=st.s_pf, slot_wait_probability=p_wait, ttft_mean_s=mean, ttft_p50_s=p50,
        ttft_p90_s=p90, ttft_p99_s=p99, e2e_mean_s=mean + decode, e2e_p99_s=p99 + decode,
        cdf_terms=(own, busy, st.tau_decode, waits),
    )


def capacity_per_s(step: StepFn, input_len: int, output_len: int, sched: Scheduler) -> float:
    """The arrival rate at which the replica saturates (slots full or prompt steps taking all the time), req/s."""
    slots, budget, cached = float(sched.slots), sched.max_num_batched_tokens, sched.cached_prompt_tokens

    def stable(rate: float) -> bool:
        # n = rate x time_in_batch(n) has a root below the slots iff the gap at full slots is <= 0 (the gap is
        # positive at n = 0 and about linear), so one evaluation at full slots decides; else a smaller batch may
        # be stable (_little's start), and where one is the rate is served: no need to solve for the batch.
        return _upper(_gap_fn(step, rate, input_len, output_len, budget, cached), sched.slots) is not None

    full = _steady(step, 0.0, slots, input_len, output_len, budget, cached)
    hi = slots / full.time_in_batch * 1.5
    lo = 0.0
    for _ in range(60):
        if not stable(hi):
            break
        lo, hi = hi, hi * 2.0
    for _ in range(40):
        mid = (lo + hi) / 2.0
        if stable(mid):
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-2 * hi:
            break
    return lo
