"""How an Auto Scaling group buys its instances: on demand (one launch template), or for a spot plan a
mixed-instances policy that keeps the plan's on-demand base and fills the rest from spot pools of the planned type
and its same-GPU alternatives (price-capacity-optimized).

Reads the plan's `spot` part; makes no sizing decision (the base and the alternatives are the plan's).
"""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_aws as aws

from infragen.plan import Plan

#: Spot allocation AWS recommends for most workloads: the lowest-priced pools among those with the most capacity
#: (EC2 Auto Scaling guide, "Allocation strategies for multiple instance types").
SPOT_ALLOCATION = "price-capacity-optimized"


def on_demand_base_nodes(plan: Plan) -> int:
    """Nodes the spot plan keeps on demand (0 for a spot plan made without a floor)."""
    return plan.spot.on_demand_base_nodes if plan.spot is not None else 0


def on_demand_replica(plan: Plan, index: int) -> bool:
    """Whether multi-node replica `index` runs on demand: the first `on_demand_base_replicas` do, whole."""
    if plan.deployment.pricing != "spot":
        return True
    return plan.spot is not None and index < plan.spot.on_demand_base_replicas


def spot_types(plan: Plan, offered: dict[str, set[str]], node_zone_ids: Sequence[str]) -> list[str]:
    """The planned type, then the plan's same-GPU alternatives offered in every node zone (an override a zone
    lacks would fail that zone's launches)."""
    zones = set(node_zone_ids)
    return [plan.deployment.instance_type,
            *(t for t in (plan.spot.alternative_instance_types if plan.spot else []) if zones <= offered.get(t, set()))]


def capacity_args(launch_template_id: pulumi.Input[str], version: pulumi.Input[str], *,
                  spot: bool, on_demand_nodes: int, instance_types: Sequence[str]) -> dict[str, object]:
    """The group's `launch_template` (on demand) or `mixed_instances_policy` (spot with an on-demand base)."""
    if not spot:
        return {"launch_template": aws.autoscaling.GroupLaunchTemplateArgs(id=launch_template_id, version=version)}
    return {"mixed_instances_policy": aws.autoscaling.GroupMixedInstancesPolicyArgs(
        instances_distribution=aws.autoscaling.GroupMixedInstancesPolicyInstancesDistributionArgs(
            on_demand_base_capacity=on_demand_nodes, on_demand_percentage_above_base_capacity=0,
            spot_allocation_strategy=SPOT_ALLOCATION),
        launch_template=aws.autoscaling.GroupMixedInstancesPolicyLaunchTemplateArgs(
            launch_template_specification=(
                aws.autoscaling.GroupMixedInstancesPolicyLaunchTemplateLaunchTemplateSpecificationArgs(
                    launch_template_id=launch_template_id, version=version)),
            overrides=[aws.autoscaling.GroupMixedInstancesPolicyLaunchTemplateOverrideArgs(instance_type=t)
                       for t in instance_types]))}
