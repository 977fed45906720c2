"""Pure figures for the Alibaba replica groups (ESS) from the plan: how the single-node replicas split over one or
two scaling groups (one per zone), each group's bounds, the ALB QPS target, the instance-refresh percentages and the
scheduled tasks of the hourly profile in UTC.

Mirrors provision/aws/autoscaling.py's derivation (floor, ceiling, target and schedule are the plan's; this module
only turns replicas into nodes, splits them over the groups and converts hours to UTC). No Pulumi, no sizing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from infragen.plan import Plan
from infragen.provision.scaling import MINUTES_PER_DAY, floor_changes, scales
from infragen.provision.scaling import fleet_bounds as shared_bounds

#: A scaling group takes up to five vSwitches, the first the most preferred (Alibaba Auto Scaling doc "Use Alibaba
#: Cloud ESS SDK to create a multi-zone scaling group": VSwitchIds.N, N = 1 to 5, N is the priority).
ESS_MAX_VSWITCHES = 5
#: Instance refresh: MaxHealthyPercentage 100~200 (terraform-provider-alicloud ess_instance_refresh validation).
REFRESH_MAX_HEALTHY_RANGE = (100, 200)
#: Lifecycle hook heartbeat timeout, seconds (terraform-provider-alicloud ess_lifecyclehook: IntBetween(30, 21600)).
HOOK_TIMEOUT_RANGE_S = (30, 21600)
#: Scheduled tasks recur by a cron expression written in UTC, and must stop repeating within 365 days of their
#: creation (pulumi-alicloud 4.0.0 ess.ScheduledTask `recurrence_value`, `recurrence_end_time`).
SCHEDULE_HORIZON_DAYS = 365


@dataclass(frozen=True)
class GroupShare:
    """One scaling group's part of the fleet (nodes)."""

    index: int
    """Group number within its kind: 0 prefers the first node zone, 1 the second."""
    min_size: int
    """Floor of the group (its share of the plan's floor)."""
    max_size: int
    """Ceiling of the group (its share of the plan's ceiling, at least its share of the peak fleet)."""
    desired: int
    """Nodes at creation (its share of `plan.deployment.nodes`); the scaler owns it afterwards."""
    on_demand: bool = False
    """A spot plan's on-demand floor group (pay-as-you-go instances); False = the plan's own pricing."""

    @property
    def key(self) -> str:
        """Name part: `g0`, `g1` (the groups every plan has, names unchanged) or `od0`, `od1` (the floor)."""
        return f"od{self.index}" if self.on_demand else f"g{self.index}"


@dataclass(frozen=True)
class ScheduledStep:
    """One daily change of the fleet's floor, at a UTC minute."""

    name: str
    """`hour-07-up-3`: the workload's hour, the direction and the fleet's new floor in nodes."""
    utc_minute: int
    """Minute of the UTC day the task fires (a rise starts one boot time before its hour)."""
    nodes: int
    """The fleet's floor (and desired nodes) from then on."""

    @property
    def cron(self) -> str:
        return f"{self.utc_minute % 60} {self.utc_minute // 60} * * *"


def fleet_bounds(plan: Plan) -> tuple[int, int, int]:
    """(min, max, desired) nodes of all single-node replicas together, bounded as on AWS (provision/scaling.py)."""
    return shared_bounds(plan, plan.deployment.nodes)


def group_count(plan: Plan, zone_slots: int) -> int:
    """Two groups (one per zone, each falling back to the other) when there are two zones and the fleet never drops
    below two nodes, or its daily schedule raises the floor to two or more (the second group is empty in the quiet
    hours and gets its nodes from the scheduled tasks, which set its floor); else one. Without a schedule a group's
    floor must stay at one node or more: target tracking computes the nodes it needs from the ones it has, so an
    empty group would never scale out again."""
    low, _, _ = fleet_bounds(plan)
    if zone_slots < 2:
        return 1
    busiest = max((change.nodes for change in floor_changes(plan)), default=low)
    return 2 if low >= 2 or busiest >= 2 else 1


def one_zone_warning(plan: Plan, zone_slots: int) -> str | None:
    """Why a fleet that grows to two or more nodes stays in one zone (one group: its floor is one node and no
    schedule raises it), or None."""
    low, high, _ = fleet_bounds(plan)
    if zone_slots < 2 or high < 2 or group_count(plan, zone_slots) > 1:
        return None
    per_node = plan.deployment.replicas_per_node
    return (f"the fleet's floor is {low} node, so it is one scaling group: the nodes it adds (up to {high}) all go "
            "to its first zone while that zone has stock (PRIORITY, the policy instance refresh needs), not over "
            f"two zones; a floor of two nodes (min_replicas: {2 * per_node}), or an hourly_profile whose scheduled "
            "floor reaches two, splits it into two groups in two zones")


def split(total: int, groups: int) -> list[int]:
    """`total` nodes over `groups` groups, the first ones taking the remainder."""
    return [total // groups + (1 if i < total % groups else 0) for i in range(groups)]


def on_demand_floor_nodes(plan: Plan) -> int:
    """Nodes a spot plan keeps on demand (`plan.spot.on_demand_base_nodes`); 0 for any other plan."""
    if plan.deployment.pricing != "spot" or plan.spot is None:
        return 0
    return plan.spot.on_demand_base_nodes


def group_shares(plan: Plan, zone_slots: int) -> list[GroupShare]:
    """Each group's bounds: the fleet's split over the groups (the shares add up to the plan's figures).

    A spot plan with an on-demand floor of B nodes gets on-demand groups holding the first B nodes of the fleet
    (their part of any fleet size n is min(n, B), as AWS's OnDemandBaseCapacity) and spot groups holding the rest.
    ESS's own base capacity (OnDemandBaseCapacity) needs the cost-optimised or composable scaling policy, and instance
    refresh, which rolls a changed launch template, only runs on priority-policy groups: two kinds of priority
    groups keep both. A spot part that scales keeps one node at least (target tracking cannot grow an empty
    group), one more than the plan's floor when the floor is all on demand (`extra_floor_nodes`)."""
    low, high, desired = fleet_bounds(plan)
    base = on_demand_floor_nodes(plan)
    # The busiest scheduled floor: a kind whose schedule reaches two nodes gets two groups (`group_count`).
    busiest = max((change.nodes for change in floor_changes(plan)), default=low)
    if base == 0:
        return _kind(low, high, desired, group_count(plan, zone_slots), on_demand=False)
    floor = _kind(min(low, base), min(high, base), min(desired, base),
                  _groups(zone_slots, min(low, base), min(busiest, base)), on_demand=True)
    if high <= base:
        return floor
    spot_low = max(low - base, 1)
    return floor + _kind(spot_low, high - base, max(desired - base, spot_low),
                         _groups(zone_slots, spot_low, max(busiest - base, 1)), on_demand=False)


def extra_floor_nodes(plan: Plan) -> int:
    """Nodes the groups keep beyond the plan's floor (the spot part's one node when the floor is all on demand)."""
    low, high, _ = fleet_bounds(plan)
    base = on_demand_floor_nodes(plan)
    return 1 if base and high > base and low <= base else 0


def share_of(nodes: int, share: GroupShare, shares: list[GroupShare], base: int) -> int:
    """`share`'s part of a fleet of `nodes` (a scheduled floor): the on-demand groups split min(nodes, base), the
    spot groups the rest (one node at least when they exist beside a floor)."""
    kind = [s for s in shares if s.on_demand == share.on_demand]
    if not base:
        part = nodes
    elif share.on_demand:
        part = min(nodes, base)
    else:
        part = max(nodes - base, 1)
    return split(part, len(kind))[share.index]


def spot_instance_types(plan: Plan, offered: dict[str, list[str]], node_zones: list[str]) -> list[str]:
    """Types the spot groups may launch: the planned one first, then the plan's same-GPU alternatives that are
    offered (as spot) in every node zone (a type one zone lacks would fail there)."""
    alternatives = plan.spot.alternative_instance_types if plan.spot is not None else []
    zones = set(node_zones)
    return [plan.deployment.instance_type,
            *(t for t in alternatives if t != plan.deployment.instance_type and zones <= set(offered.get(t, [])))]


def _groups(zone_slots: int, low: int, busiest: int) -> int:
    """`group_count`'s rule for one kind of group: two with two zones and a floor (or scheduled floor) of two."""
    return 2 if zone_slots >= 2 and (low >= 2 or busiest >= 2) else 1


def _kind(low: int, high: int, desired: int, groups: int, *, on_demand: bool) -> list[GroupShare]:
    return [GroupShare(index=i, min_size=mn, max_size=max(mx, d), desired=d, on_demand=on_demand)
            for i, (mn, mx, d) in enumerate(zip(split(low, groups), split(high, groups), split(desired, groups),
                                                strict=True))]


def target_qps_per_engine(plan: Plan) -> float | None:
    """Target of the ALB's QPS per backend server (one backend = one engine port): the plan's requests/s per replica
    at the utilisation cap, less the ramp headroom. None when nothing scales."""
    if plan.scaling is None or not scales(plan):
        return None
    return round(plan.scaling.target_requests_per_s_per_replica, 3)


def refresh_max_healthy_percentage(share: GroupShare) -> int:
    """How far an instance refresh may exceed the group's capacity: one node above the group's floor (so a refresh
    never stalls at the floor and never drops below capacity, `MinHealthyPercentage` 100)."""
    low, high = REFRESH_MAX_HEALTHY_RANGE
    return max(low, min(high, 100 + math.ceil(100 / max(1, share.min_size))))


def launch_wait_s(plan: Plan) -> int:
    """How long a new node waits in the scale-out lifecycle hook before ESS counts it in service and adds it to the
    load balancer: the plan's boot estimate (download + load), within the hook's range."""
    low, high = HOOK_TIMEOUT_RANGE_S
    return max(low, min(plan.network.health_check_grace_s, high))


def scheduled_steps(plan: Plan, on: date) -> list[ScheduledStep]:
    """The daily floor changes of the profile (scheduled strategy only) in UTC as of `on`, at the same local
    times as the AWS actions."""
    offset = utc_offset_minutes(plan.scaling.time_zone, on) if plan.scaling else 0
    return [ScheduledStep(c.name, (c.local_minute - offset) % MINUTES_PER_DAY, c.nodes) for c in floor_changes(plan)]


def utc_offset_minutes(time_zone: str, on: date) -> int:
    """The zone's offset from UTC at noon of `on`, minutes (Asia/Shanghai: +480)."""
    offset = datetime(on.year, on.month, on.day, 12, tzinfo=ZoneInfo(time_zone)).utcoffset()
    return int(offset.total_seconds() // 60) if offset is not None else 0


def keeps_offset(time_zone: str, year: int) -> bool:
    """Whether the zone has one UTC offset all year (no daylight saving time): UTC crons then never drift."""
    return utc_offset_minutes(time_zone, date(year, 1, 15)) == utc_offset_minutes(time_zone, date(year, 7, 15))


def schedule_window(today: date) -> tuple[str, str]:
    """(first launch, end of recurrence) of the scheduled tasks, ISO 8601 UTC as ESS wants them: from tomorrow, and
    until 365 days after the first of this month (within ESS's year from any day of the month, and the same all
    month, so `pulumi up` renews the year without updating the tasks every day)."""
    start = today + timedelta(days=1)
    end = date(today.year, today.month, 1) + timedelta(days=SCHEDULE_HORIZON_DAYS)
    return f"{start.isoformat()}T00:00Z", f"{end.isoformat()}T00:00:00Z"


def today_utc() -> date:
    return datetime.now(UTC).date()
