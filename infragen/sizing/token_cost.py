"""What a million output tokens cost on a candidate: at its own SLO-meeting capacity and at the workload's peak.

Instances only, like the candidates table's $/month (the chosen plan's bill, bill.py, adds the other lines).
At the peak every candidate serves the same tokens, so that figure orders candidates as their cost does; at its
own capacity a candidate with room to spare (a big node for a small load) costs less per token than its monthly
cost suggests, which is what `infragen plan --sort token-cost` ranks by. Pure arithmetic.
"""

from __future__ import annotations

from infragen.spec import TrafficSpec

SECONDS_PER_HOUR = 3600


def usd_per_million_tokens(usd_per_hour: float | None, tokens_per_s: float) -> float | None:
    """Dollars per 1M tokens at `tokens_per_s` (None without a price or tokens)."""
    if usd_per_hour is None or tokens_per_s <= 0:
        return None
    return round(usd_per_hour / (tokens_per_s * SECONDS_PER_HOUR) * 1e6, 4)


def capacity_output_tokens_per_s(replicas: int, capacity_requests_per_s: float, output_tokens: int) -> float:
    """Output tokens/s of `replicas` replicas each serving its SLO-meeting capacity (requests/s at its batch)."""
    return replicas * capacity_requests_per_s * output_tokens


def peak_output_tokens_per_s(traffic: TrafficSpec, replicas: int, output_tokens_per_s_per_replica: float) -> float:
    """Output tokens/s at the workload's peak: peak requests/s x output tokens (open loop), else what the replicas
    generate for the concurrent users at peak (closed loop, as the bill counts it)."""
    if traffic.peak_requests_per_s is not None:
        return traffic.peak_requests_per_s * traffic.output_tokens
    return replicas * output_tokens_per_s_per_replica
