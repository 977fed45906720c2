"""Replicas for a peak load: the utilisation cap and the arithmetic behind it. Pure functions."""

from __future__ import annotations

import math

#: Highest share of a replica's SLO-meeting capacity the plan lets peak traffic use. Continuous batching
#: absorbs bursts only while free batch slots remain; at rho <= 0.8 an M/D/c queue of batch slots waits
#: little (policy choice, not a measurement).
RHO_MAX = 0.8

METHOD_QPS = (f"open loop: replicas = ceil(peak requests/s / ({RHO_MAX} x capacity per replica)); capacity = "
              "requests/s of one replica at the largest batch whose TTFT/TPOT/E2E (inflated by the uncertainty "
              "band) meet the SLOs (Little's law: batch / end-to-end latency)")
METHOD_USERS = ("closed loop: replicas = ceil(concurrent users / batch per replica), batch = the largest whose "
                "TTFT/TPOT/E2E (inflated by the uncertainty band) meet the SLOs; every user has one request "
                "in flight at peak")


def replicas_for_rate(peak_requests_per_s: float, capacity_requests_per_s: float, min_replicas: int) -> int:
    if capacity_requests_per_s <= 0:
        raise ValueError("capacity must be positive")
    return max(min_replicas, math.ceil(peak_requests_per_s / (RHO_MAX * capacity_requests_per_s) - 1e-9))


def replicas_for_users(users: int, batch_per_replica: int, min_replicas: int) -> int:
    if batch_per_replica <= 0:
        raise ValueError("batch must be positive")
    return max(min_replicas, math.ceil(users / batch_per_replica))
