"""Replicas for a peak load: the utilisation cap and the arithmetic behind it. Pure functions."""

from __future__ import annotations

import math
from collections.abc import Callable

#: Highest share of a replica's SLO-meeting capacity the plan lets peak traffic use. Continuous batching
#: absorbs bursts only while free batch slots remain; at rho <= 0.8 an M/D/c queue of batch slots waits
#: little (policy choice, not a measurement).
RHO_MAX = 0.8

METHOD_QPS = ("open loop (load model, docs/performance-model.md#load-arrival-rate-estimate---rate): replicas = "
              "ceil(peak requests/s / rate per replica), the rate per replica = the largest Poisson arrival rate "
              "whose TTFT p99, TPOT and E2E p99 (every step slowed by the slo_confidence factor) meet the SLOs, "
              "with vLLM's chunked prefill, batch slots and queueing modelled")
METHOD_QPS_SLOTS = (f"open loop (llama.cpp slots): replicas = ceil(peak requests/s / ({RHO_MAX} x capacity per "
                    "replica)); capacity = requests/s of one replica at the largest batch whose TTFT/TPOT/E2E "
                    "(x the slo_confidence factor) meet the SLOs (Little's law: batch / end-to-end latency)")
METHOD_USERS = ("closed loop: replicas = ceil(concurrent users / batch per replica), batch = the largest whose "
                "TTFT/TPOT/E2E (x the slo_confidence factor) meet the SLOs; every user has one request "
                "in flight at peak")
METHOD_USERS_THINK = (
    "closed loop with think time: each user waits think_time_s between an answer and the next request, so "
    "requests in flight = users x E2E / (think + E2E) and the arrival rate = users / (think + E2E); users send "
    "independently (each in flight a share p = E2E / (think + E2E) of the time), so a replica serves the most users "
    "n whose in-flight requests stay within its batch B 99% of the time (n p + 2.326 sqrt(n p (1 - p)) <= B); "
    "replicas = ceil(users / n), B = the largest batch whose TTFT/TPOT/E2E (x the slo_confidence factor) meet "
    "the SLOs")
#: Standard normal 99th percentile: the closed loop keeps the in-flight requests within the batch 99% of the time,
#: the percentile the SLOs are stated at (slo.ttft_p99_ms).
Z_P99 = 2.326
#: Fixed-point rounds for the closed loop's in-flight requests at peak (each round re-estimates one batch).
MAX_FIXED_POINT_ROUNDS = 8


def replicas_for_rate(peak_requests_per_s: float, per_replica_requests_per_s: float, min_replicas: int) -> int:
    """Replicas when each may carry `per_replica_requests_per_s` (already below its capacity)."""
    if per_replica_requests_per_s <= 0:
        raise ValueError("capacity must be positive")
    return max(min_replicas, math.ceil(peak_requests_per_s / per_replica_requests_per_s - 1e-9))


def users_per_replica(batch: int, e2e_s: float, think_time_s: float) -> float:
    """Most users one replica serves while the requests they have in flight stay within `batch` 99% of the time.

    Each user is in flight a share p = E2E / (think + E2E) of its cycle, independently of the others, so the
    in-flight count of n users is binomial (mean n p, variance n p (1 - p)); the largest n whose mean plus
    Z_P99 standard deviations (normal approximation) is at most the batch, and never fewer than the batch (n users
    never have more than n in flight). Think 0: p = 1, no spread, n = batch.
    """
    if batch <= 0:
        raise ValueError("batch must be positive")
    if think_time_s <= 0:
        return float(batch)
    if e2e_s <= 0:
        raise ValueError("end-to-end latency must be positive")
    p = e2e_s / (think_time_s + e2e_s)
    spread = Z_P99 * math.sqrt(p * (1.0 - p))
    root = (-spread + math.sqrt(spread * spread + 4.0 * p * batch)) / (2.0 * p)  # sqrt(n): p n + spread sqrt(n) = B
    return max(float(batch), root * root)  # n users never have more than n requests in flight


def replicas_for_users(users: int, batch_per_replica: int, min_replicas: int, *, e2e_s: float = 0.0,
                       think_time_s: float = 0.0) -> int:
    """Replicas so that no replica has more than `batch_per_replica` requests in flight (99% of the time)."""
    per = users_per_replica(batch_per_replica, e2e_s, think_time_s)
    return max(min_replicas, math.ceil(users / per - 1e-9))


def in_flight(users: float, e2e_s: float, think_time_s: float) -> float:
    """Mean requests in flight among `users` closed-loop users: users x E2E / (think + E2E)."""
    if think_time_s <= 0:
        return float(users)
    return users * e2e_s / (think_time_s + e2e_s)


def arrival_rate(users: float, e2e_s: float, think_time_s: float) -> float:
    """Requests/s `users` closed-loop users send: users / (think + E2E)."""
    return users / (think_time_s + e2e_s)


def closed_loop_batch(users: float, think_time_s: float, batch_max: int, e2e_s_at: Callable[[int], float]) -> int:
    """Requests in flight on one replica serving `users` at peak (rounded up, at most `batch_max`).

    The latency depends on the batch and the batch on the latency: start from the most (every user in flight,
    capped by the batch) and step down b -> ceil(users x E2E(b) / (think + E2E(b))). E2E grows with the batch,
    so the steps never rise and stop at the largest fixed point, which errs high (conservative).
    """
    b = max(1, min(batch_max, math.ceil(users - 1e-9)))
    if think_time_s <= 0:
        return b
    for _ in range(MAX_FIXED_POINT_ROUNDS):
        nxt = max(1, min(b, math.ceil(in_flight(users, e2e_s_at(b), think_time_s) - 1e-9)))
        if nxt == b:
            break
        b = nxt
    return b
