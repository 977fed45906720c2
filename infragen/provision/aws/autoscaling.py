"""Autoscaling of the AWS replica group from the plan's daily view (`plan.scaling`): bounds, ALB request-count
target tracking, and scheduled actions following the hourly profile.

Makes no sizing decision: the floor, ceiling, target and schedule are the plan's; this module only turns replicas
into nodes and requests/s into the metric's unit. Multi-node replicas (a head instance plus a worker group) are not
scaled: they would have to scale as whole replicas, which this layout cannot.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from infragen.plan import Plan
from infragen.provision.aws.layout import POST_HOOK_GRACE_S
from infragen.provision.scaling import MINUTES_PER_DAY, fleet_bounds, floor_changes, scales

#: ALBRequestCountPerTarget counts requests per target per minute: a target tracking target value for a count metric
#: is "the optimal average request count per instance during any one-minute interval" (AWS Auto Scaling API,
#: TargetTrackingConfiguration.TargetValue).
SECONDS_PER_METRIC_PERIOD = 60


@dataclass(frozen=True)
class ScheduledAction:
    """One daily scheduled action (cron in the plan's time zone)."""

    name: str
    recurrence: str
    min_size: int
    desired_capacity: int


def group_bounds(plan: Plan, count: int) -> tuple[int, int, int]:
    """(min, max, desired) nodes of the replica group (provision/scaling.py, shared with Alibaba)."""
    return fleet_bounds(plan, count)


def target_requests_per_minute(plan: Plan) -> float | None:
    """The target value of ALBRequestCountPerTarget (one target = one engine), None when nothing scales."""
    if plan.scaling is None or not scales(plan):
        return None
    return round(plan.scaling.target_requests_per_s_per_replica * SECONDS_PER_METRIC_PERIOD, 2)


def scheduled_actions(plan: Plan) -> list[ScheduledAction]:
    """Daily actions that move the floor with the profile (cron in the plan's time zone). Empty unless the plan's
    strategy is scheduled."""
    out = []
    for change in floor_changes(plan):
        at = change.local_minute % MINUTES_PER_DAY
        out.append(ScheduledAction(change.name, f"{at % 60} {at // 60} * * *", change.nodes, change.nodes))
    return out


def attach_autoscaling(name: str, plan: Plan, group: aws.autoscaling.Group, *, load_balancer_arn: pulumi.Input[str],
                       target_group_arns: list[pulumi.Input[str]],
                       opts: pulumi.ResourceOptions | None = None) -> list[pulumi.CustomResource]:
    """Target tracking per target group (ALB only: an NLB has no request count) and the scheduled actions."""
    sc = plan.scaling
    target = target_requests_per_minute(plan)
    if sc is None or target is None:
        return []
    out: list[pulumi.CustomResource] = []
    if plan.network.load_balancer == "alb":
        for i, tg_arn in enumerate(target_group_arns):
            label = pulumi.Output.all(load_balancer_arn, tg_arn).apply(lambda arns: _resource_label(*arns))
            out.append(aws.autoscaling.Policy(
                f"{name}-requests-{i}", autoscaling_group_name=group.name, policy_type="TargetTrackingScaling",
                # The launch lifecycle hook holds a node until its model is loaded (compute.py): the boot time has
                # passed before it is in service, so only the post-hook grace remains to warm up.
                estimated_instance_warmup=POST_HOOK_GRACE_S,
                target_tracking_configuration=aws.autoscaling.PolicyTargetTrackingConfigurationArgs(
                    predefined_metric_specification=(
                        aws.autoscaling.PolicyTargetTrackingConfigurationPredefinedMetricSpecificationArgs(
                            predefined_metric_type="ALBRequestCountPerTarget", resource_label=label)),
                    target_value=target),
                opts=opts))
    _, top, _ = group_bounds(plan, plan.deployment.nodes)
    for action in scheduled_actions(plan):
        out.append(aws.autoscaling.Schedule(
            f"{name}-{action.name}", scheduled_action_name=action.name, autoscaling_group_name=group.name,
            recurrence=action.recurrence, time_zone=sc.time_zone, min_size=action.min_size, max_size=top,
            desired_capacity=action.desired_capacity, opts=opts))
    return out


def _resource_label(load_balancer_arn: str, target_group_arn: str) -> str:
    """`app/<lb>/<id>/targetgroup/<tg>/<id>`: the ARN suffixes CloudWatch's ELB metrics are keyed by."""
    lb = load_balancer_arn.split(":loadbalancer/", 1)[-1]
    tg = target_group_arn.rsplit(":", 1)[-1]
    return f"{lb}/{tg}"
