"""Packed engines behind one AWS target group: the Auto Scaling group registers each node at the target group's
port (the first engine); the node registers its other engine ports itself (templates/scripts/lb-ports.sh.j2) and
takes them out again when it stops or the group terminates it.

This module holds the AWS side of that contract: which ports the node registers, the node's permission to do it
(scoped to the one target group), and the termination lifecycle hook that keeps the node until those ports have
drained. Makes no sizing decision.
"""

from __future__ import annotations

import json

import pulumi
import pulumi_aws as aws

from infragen.plan import Plan
from infragen.render.cloud_init import AWS_DRAIN_HOOK, node_registered_ports

__all__ = ["attach_port_targets", "drain_hook", "node_registered_ports", "port_targets_policy"]

#: Extra seconds the drain hook allows beyond the deregistration delay (the node polls its lifecycle state every
#: few seconds, then calls the API).
DRAIN_MARGIN_S = 60
#: Lifecycle hook heartbeat bounds, seconds (Auto Scaling API: 30-7200).
HEARTBEAT_RANGE_S = (30, 7200)


def drain_hook(plan: Plan, deregistration_delay_s: int) -> aws.autoscaling.GroupInitialLifecycleHookArgs | None:
    """The termination hook of a packed serving group: the Auto Scaling group deregisters (and drains) only the
    port it registered, so the node deregisters the others when its target lifecycle state turns Terminated and
    completes this hook once they have drained. CONTINUE by default: a node that cannot answer still terminates."""
    if not node_registered_ports(plan):
        return None
    low, high = HEARTBEAT_RANGE_S
    return aws.autoscaling.GroupInitialLifecycleHookArgs(
        name=AWS_DRAIN_HOOK, lifecycle_transition="autoscaling:EC2_INSTANCE_TERMINATING",
        heartbeat_timeout=max(low, min(deregistration_delay_s + DRAIN_MARGIN_S, high)), default_result="CONTINUE")


def port_targets_policy(target_group_arn: str) -> str:
    """What the node may do with the load balancer: find its group's target group, and register or deregister
    targets of that one target group only."""
    return json.dumps({"Version": "2012-10-17", "Statement": [
        # Describe calls take no resource-level permissions (service authorization reference).
        {"Sid": "FindTargetGroup", "Effect": "Allow", "Action": ["autoscaling:DescribeAutoScalingGroups"],
         "Resource": "*"},
        {"Sid": "OwnEnginePorts", "Effect": "Allow",
         "Action": ["elasticloadbalancing:RegisterTargets", "elasticloadbalancing:DeregisterTargets"],
         "Resource": [target_group_arn]},
    ]})


def attach_port_targets(name: str, plan: Plan, role: aws.iam.Role, target_group: aws.lb.TargetGroup,
                        opts: pulumi.ResourceOptions) -> aws.iam.RolePolicy | None:
    """The node role's permission over its target group, when the plan packs engines (else None)."""
    if not node_registered_ports(plan):
        return None
    return aws.iam.RolePolicy(f"{name}-engine-ports", role=role.id,
                              policy=target_group.arn.apply(port_targets_policy), opts=opts)
