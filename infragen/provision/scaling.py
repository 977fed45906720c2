"""What both clouds' replica groups take from the plan's daily view: whether they scale, their node bounds and the
daily floor changes. Cloud-neutral (no Pulumi): AWS writes the changes as cron in the plan's time zone, Alibaba
as UTC cron, from the same list, so the two stacks cannot drift apart."""

from __future__ import annotations

import math
from dataclasses import dataclass

from infragen.plan import Plan

MINUTES_PER_DAY = 24 * 60


@dataclass(frozen=True)
class FloorChange:
    """One daily change of the fleet's floor."""

    name: str
    """`hour-07-up-3`: the workload's hour, the direction and the new floor in nodes."""
    local_minute: int
    """Minute of the workload's day it takes effect (a rise one boot time before its hour; may be negative)."""
    nodes: int
    """The floor (and desired nodes) from then on."""


def scales(plan: Plan) -> bool:
    """Whether the replica groups follow the load (a daily view and single-node replicas)."""
    return plan.scaling is not None and plan.deployment.nodes_per_replica == 1


def nodes_for(plan: Plan, replicas: int) -> int:
    """Nodes that hold `replicas` engines (packed nodes hold several)."""
    return math.ceil(replicas / plan.deployment.replicas_per_node)


def fleet_bounds(plan: Plan, count: int) -> tuple[int, int, int]:
    """(min, max, desired) nodes of a fleet of `count` nodes; all `count` when it does not scale.

    With the scheduled strategy the floor is the quietest hour (each change raises it one boot time ahead of its
    hour); with target tracking alone it is the plan's `min_replicas`, which carries the steepest ramp.
    """
    sc = plan.scaling
    if sc is None or not scales(plan):
        return count, count, count
    floor = min(sc.replicas_by_hour) if sc.strategy == "scheduled" and sc.replicas_by_hour else sc.min_replicas
    return nodes_for(plan, floor), max(nodes_for(plan, sc.max_replicas), count), count


def floor_changes(plan: Plan) -> list[FloorChange]:
    """The daily floor changes of the profile (scheduled strategy only): a rise starts one boot time before its
    hour, a fall waits for the hour."""
    sc = plan.scaling
    if sc is None or not scales(plan) or sc.strategy != "scheduled" or sc.replicas_by_hour is None:
        return []
    lead = min(MINUTES_PER_DAY - 1, math.ceil(sc.boot.total_s / 60))
    nodes = [nodes_for(plan, r) for r in sc.replicas_by_hour]
    out = []
    for h, n in enumerate(nodes):
        before = nodes[h - 1]
        if n != before:
            out.append(FloorChange(f"hour-{h:02d}-{'up' if n > before else 'down'}-{n}",
                                   h * 60 - (lead if n > before else 0), n))
    return out
