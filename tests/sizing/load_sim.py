"""A seeded discrete-event simulation of one vLLM-like replica under Poisson arrivals (test helper).

Independent of infragen.sizing.load: it steps the scheduler request by request (FCFS waiting queue, batch slots,
a per-step token budget with decode tokens first and prompt chunks after) and times each step with the same
step-time function, so the analytic queueing model can be checked against what the scheduler actually does.
"""

from __future__ import annotations

import random
import statistics
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class SimResult:
    running_batch: float
    """Time-average of requests holding a slot."""
    tpot_s: float
    """Mean over requests of (e2e - ttft) / (output - 1)."""
    ttft_p50_s: float
    ttft_p90_s: float
    ttft_p99_s: float
    ttft_mean_s: float
    e2e_mean_s: float
    completed: int


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def simulate(step: Callable[[float, float, float, float], float], rate: float, input_len: int, output_len: int,
             slots: int, budget: int, requests: int = 4000, seed: int = 1, warmup: int = 400,
             exponential_outputs: bool = False) -> SimResult:
    rng = random.Random(seed)
    arrivals: deque[tuple[int, float, int]] = deque()
    t_arr = 0.0
    for i in range(requests):
        t_arr += rng.expovariate(rate)
        out = max(2, round(rng.expovariate(1.0 / output_len))) if exponential_outputs else output_len
        arrivals.append((i, t_arr, out))
    waiting: deque[list[float]] = deque()  # [id, arrival, prompt_left, out_left, ctx, out_total]
    running: list[list[float]] = []
    ttft: dict[int, float] = {}
    done: list[tuple[float, float, float]] = []  # (ttft, e2e, out)
    t = 0.0
    area = 0.0
    while arrivals or waiting or running:
        while arrivals and arrivals[0][1] <= t:
            i, a, out = arrivals.popleft()
            waiting.append([i, a, input_len, out, 0, out])
        if not waiting and not running:
            t = arrivals[0][1]
            continue
        left = budget
        decode = [r for r in running if r[2] == 0]
        left -= len(decode)
        chunks: list[tuple[list[float], int]] = []
        for r in running:  # a running request still prefilling continues its prompt first
            if r[2] > 0 and left > 0:
                k = int(min(r[2], left))
                chunks.append((r, k))
                left -= k
        while waiting and len(running) < slots and left > 0:
            r = waiting.popleft()
            running.append(r)
            k = int(min(r[2], left))
            chunks.append((r, k))
            left -= k
        n_dec = len(decode)
        ctx = sum(r[4] for r in decode) / n_dec if n_dec else 0.0
        p = sum(k for _, k in chunks)
        pctx = sum(k * (input_len - r[2] + k / 2.0) for r, k in chunks) / p if p else 0.0
        dt = step(float(n_dec), ctx, float(p), pctx)
        area += len(running) * dt if t >= 0 else 0.0
        t += dt
        for r in decode:
            r[3] -= 1
            r[4] += 1
        for r, k in chunks:
            r[2] -= k
            if r[2] == 0:  # the step that finishes the prompt samples the first token
                ttft[int(r[0])] = t - r[1]
                r[3] -= 1
                r[4] = input_len + 1
        still = []
        for r in running:
            if r[2] == 0 and r[3] <= 0:
                done.append((ttft[int(r[0])], t - r[1], r[5]))
                if len(done) == warmup:
                    area, t_start = 0.0, t
            else:
                still.append(r)
        running = still
    kept = done[warmup:]
    ttfts = [x[0] for x in kept]
    tpots = [(e - f) / (o - 1) for f, e, o in kept if o > 1]
    return SimResult(
        running_batch=area / (t - t_start), tpot_s=statistics.fmean(tpots), ttft_p50_s=_pct(ttfts, 0.5),
        ttft_p90_s=_pct(ttfts, 0.9), ttft_p99_s=_pct(ttfts, 0.99), ttft_mean_s=statistics.fmean(ttfts),
        e2e_mean_s=statistics.fmean(x[1] for x in kept), completed=len(kept),
    )
