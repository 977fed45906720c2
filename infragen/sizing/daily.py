"""Traffic over a day: replicas per hour, autoscaling bounds and the monthly cost at the daily profile.

Pure arithmetic on the chosen candidate's per-replica capacity (the same batch, so the same SLOs every hour);
it never changes the choice of instance, which is sized for the peak.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from infragen.plan import BootPlan, ScalingPlan
from infragen.sizing import queueing
from infragen.sizing.resources import BootTime
from infragen.spec import HOURS_PER_DAY, TrafficSpec
from infragen.units import HOURS_PER_MONTH

MINUTES_PER_DAY = HOURS_PER_DAY * 60

METHOD = (
    "each hour sized like the peak at the same batch (so the same SLOs): replicas = ceil(hour's load / load one "
    "replica carries at the cap); scheduled: each scale-up starts one boot time before its hour; target tracking: "
    "the floor carries the quietest hour plus the steepest hourly ramp's rise during one boot time (the load moving "
    "evenly within the hour), the target keeps the headroom the steepest ramp needs above the floor; the cheaper "
    "of the two is the strategy; 730-hour month"
)
METHOD_AVERAGE = (
    "average only (no hourly profile): the fleet is priced at the replicas the average load needs, as if it "
    "followed the load exactly; the ramp is unknown, so the floor is the workload's min_replicas and the target "
    "keeps no ramp headroom (give traffic.hourly_profile for both); 730-hour month"
)


@dataclass(frozen=True)
class ReplicaShape:
    """What one replica carries and how replicas map onto billed nodes."""

    load_per_replica: float
    """Load one replica carries within the SLOs, in the peak's unit (requests/s at the cap, or users)."""
    requests_per_s_per_replica: float
    """The same capacity as requests/s (what a load balancer counts)."""
    min_replicas: int
    nodes_per_replica: int
    replicas_per_node: int

    def replicas_for(self, load: float) -> int:
        return max(self.min_replicas, math.ceil(load / self.load_per_replica - 1e-9))

    def nodes_for(self, replicas: int) -> int:
        return math.ceil(replicas * self.nodes_per_replica / self.replicas_per_node)


def shape_for(traffic: TrafficSpec, *, capacity_requests_per_s: float, batch: int, min_replicas: int,
              nodes_per_replica: int, replicas_per_node: int) -> ReplicaShape:
    """The per-replica load in the unit the peak was sized in (open loop: the requests/s one replica may carry
    within the SLOs, `capacity_requests_per_s`; closed: users)."""
    if traffic.peak_requests_per_s is not None:
        return ReplicaShape(capacity_requests_per_s, capacity_requests_per_s, min_replicas, nodes_per_replica,
                            replicas_per_node)
    # Closed loop: users per replica; with think time a replica of `batch` serves batch x (think + E2E) / E2E users,
    # E2E = batch / capacity (Little's law).
    users = queueing.users_per_replica(batch, batch / capacity_requests_per_s if capacity_requests_per_s > 0
                                       else 0.0, traffic.think_time_s)
    return ReplicaShape(users, capacity_requests_per_s, min_replicas, nodes_per_replica, replicas_per_node)


def select_scaling(traffic: TrafficSpec, shape: ReplicaShape, boot: BootTime, *,
                   node_usd_per_hour: float | None, on_demand_base_nodes: int = 0,
                   on_demand_node_usd_per_hour: float | None = None) -> ScalingPlan | None:
    """Replicas per hour, the autoscaling floor, ceiling and target, and the cost at the profile (None: no shape).

    A spot plan's first `on_demand_base_nodes` running nodes are billed at `on_demand_node_usd_per_hour`."""
    base = (on_demand_base_nodes, on_demand_node_usd_per_hour)
    peak = traffic.peak_requests_per_s if traffic.peak_requests_per_s is not None else float(
        traffic.concurrent_users or 0)
    boot_plan = BootPlan(install_s=boot.install_s, download_s=boot.download_s, load_s=boot.load_s,
                         download_gbps=boot.download_gbps, total_s=boot.total_s)
    peak_fleet = [shape.replicas_for(peak)] * MINUTES_PER_DAY
    if traffic.hourly_profile is not None:
        profile = traffic.hourly_profile
        loads = [f * peak for f in profile]
        by_hour = [shape.replicas_for(x) for x in loads]
        ramp_share = min(1.0, boot.total_s / 3600)
        rises = [max(0.0, loads[h] - loads[h - 1]) for h in range(HOURS_PER_DAY)]  # h - 1 = -1: hour 23 -> 0
        floor = shape.replicas_for(min(loads) + max(rises) * ramp_share)
        headroom = 1.0
        for h, rise in enumerate(rises):
            before, grows = loads[h - 1], rise * ramp_share
            if rise > 0 and floor * shape.load_per_replica < before + grows - 1e-9 and before > 0:
                headroom = min(headroom, before / (before + grows))
        tracked = [max(floor, shape.replicas_for(x / headroom)) for x in loads]
        plans = {"scheduled": _scheduled(by_hour, boot.total_s), "target-tracking": _per_minute(tracked)}
        average = sum(profile) / HOURS_PER_DAY
        steepest = max(rises) / peak if peak else 0.0
        method = METHOD
    else:
        assert traffic.average_requests_per_s is not None and traffic.peak_requests_per_s is not None
        average = traffic.average_requests_per_s / traffic.peak_requests_per_s
        profile, by_hour, headroom, steepest, method = None, None, 1.0, 0.0, METHOD_AVERAGE
        floor = shape.min_replicas
        plans = {"target-tracking": [shape.replicas_for(traffic.average_requests_per_s)] * MINUTES_PER_DAY}
    cost = {name: _monthly_usd(fleet, shape, node_usd_per_hour, base) for name, fleet in plans.items()}
    strategy = min(plans, key=lambda n: (cost[n] if cost[n] is not None else sum(plans[n]), n != "target-tracking"))
    fleet = plans[strategy]
    return ScalingPlan(
        time_zone=traffic.time_zone, hourly_profile=profile, average_load_fraction=round(average, 4),
        replicas_by_hour=by_hour, boot=boot_plan, steepest_ramp_per_hour=round(steepest, 4), min_replicas=floor,
        max_replicas=max(floor, peak_fleet[0], shape.replicas_for(peak / headroom)),
        target_requests_per_s_per_replica=round(shape.requests_per_s_per_replica * headroom, 4),
        strategy=strategy,  # type: ignore[arg-type]
        average_replicas=round(sum(fleet) / MINUTES_PER_DAY, 3),
        usd_per_month_at_profile=None if cost[strategy] is None else round(cost[strategy], 2),
        usd_per_month_at_peak=_round(_monthly_usd(peak_fleet, shape, node_usd_per_hour, base)),
        method=method)


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 2)


def _per_minute(by_hour: list[int]) -> list[int]:
    return [r for r in by_hour for _ in range(60)]


def _scheduled(by_hour: list[int], boot_s: int) -> list[int]:
    """Replicas running each minute when every hour's fleet is started one boot time before the hour."""
    lead = min(MINUTES_PER_DAY, math.ceil(boot_s / 60))
    fleet = [0] * MINUTES_PER_DAY
    for h, replicas in enumerate(by_hour):
        for minute in range(h * 60 - lead, h * 60 + 60):
            i = minute % MINUTES_PER_DAY
            fleet[i] = max(fleet[i], replicas)
    return fleet


def _monthly_usd(fleet: list[int], shape: ReplicaShape, node_usd_per_hour: float | None,
                 base: tuple[int, float | None] = (0, None)) -> float | None:
    """The fleet's monthly cost; `base` = (nodes billed at the second price first, that price) for a spot plan's
    on-demand floor."""
    if node_usd_per_hour is None:
        return None
    base_nodes, base_usd = base if base[1] is not None else (0, node_usd_per_hour)
    nodes = [shape.nodes_for(r) for r in fleet]
    held = [min(n, base_nodes) for n in nodes]
    usd_per_day = (sum(nodes) - sum(held)) / 60 * node_usd_per_hour + sum(held) / 60 * (base_usd or 0.0)
    return usd_per_day * HOURS_PER_MONTH / HOURS_PER_DAY
