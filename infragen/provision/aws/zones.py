"""Where the nodes go: the region's zones that offer the plan's instance type (and which of the spot plan's
alternatives each zone offers), asked once while the program runs, so "no zone offers X" ends the preview with
one clean message instead of a traceback from inside an apply.

Read-only data-source calls; the choice itself is layout.choose_zones (pure).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from infragen.plan import Plan
from infragen.provision.aws.layout import choose_zones


@dataclass(frozen=True)
class Zones:
    """The zone ids the stack uses."""

    node_zone_ids: list[str]
    """Zone of each private (node) subnet, in subnet order: distinct where two zones offer the type."""
    lb_zone_ids: list[str]
    """Zone of each public (load-balancer) subnet: always distinct."""
    offered: dict[str, set[str]]
    """Instance type -> zone ids offering it (the planned type and the spot plan's alternatives)."""

    @property
    def spread(self) -> bool:
        """Whether the node subnets span two or more zones."""
        return len(set(self.node_zone_ids)) > 1


def _offerings(types: Sequence[str], invoke: pulumi.InvokeOptions) -> dict[str, set[str]]:
    found = aws.ec2.get_instance_type_offerings(
        location_type="availability-zone-id", opts=invoke,
        filters=[aws.ec2.GetInstanceTypeOfferingsFilterArgs(name="instance-type", values=list(types))])
    if len(types) == 1:
        return {types[0]: set(found.locations)}
    out: dict[str, set[str]] = {}
    for itype, zone in zip(found.instance_types, found.locations, strict=True):
        out.setdefault(itype, set()).add(zone)
    return out


def resolve_zones(plan: Plan, provider: pulumi.ProviderResource, *,
                  reservation_zone: str | None = None) -> Zones:
    """Ask the region for its zones and offerings and choose the stack's zones (InputError when none fits)."""
    d = plan.deployment
    invoke = pulumi.InvokeOptions(provider=provider)
    available = list(aws.get_availability_zones(state="available", opts=invoke).zone_ids)
    offered = _offerings([d.instance_type], invoke)
    alternatives = plan.spot.alternative_instance_types if plan.spot else []
    if alternatives:
        offered |= _offerings(alternatives, invoke)
    nodes, lb = choose_zones(sorted(offered[d.instance_type]), available, d.instance_type, d.region,
                             reservation_zone=reservation_zone)
    return Zones(node_zone_ids=nodes, lb_zone_ids=lb, offered=offered)
