"""Alibaba Cloud replica groups: single-node replicas as ESS scaling groups built from one launch template, attached
to the load balancer's server group on every engine port, with the plan's autoscaling and a rolling refresh.

A failed node is replaced by ESS without `pulumi up` (ECS health check); a changed launch template (user data, image,
disks) is rolled out by an instance refresh that adds a node before it removes one. Counts, bounds, targets and
schedules come from the plan through `autoscaling.py`; this module makes no sizing decision.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import pulumi
import pulumi_alicloud as alicloud

from infragen.provision.alicloud.autoscaling import GroupShare, ScheduledStep, refresh_max_healthy_percentage, share_of
from infragen.provision.alicloud.compute import SPOT_STRATEGY, encode_user_data
from infragen.provision.alicloud.layout import DiskLayout
from infragen.provision.common import node_tags

#: Target tracking on the ALB's "QPS per backend server" (Alibaba Auto Scaling doc "Target tracking scaling rules":
#: API metric LoadBalancerRealServerAverageQps, "(ALB) QPS per Backend Server", the ALB server group to be named);
#: the provider passes the server group as the `rulePool` alarm dimension (terraform-provider-alicloud
#: ess_scaling_rule: dimension_key accepts only rulePool, sent for TargetTrackingScalingRule).
QPS_METRIC = "LoadBalancerRealServerAverageQps"
QPS_DIMENSION = "rulePool"


@dataclass(frozen=True)
class ReplicaGroupsArgs:
    """Inputs of `AliReplicaGroups`."""

    prefix: str
    """Name prefix: the workload and the stack (launch template and scaling group names are unique in a region)."""
    instance_type: str
    """ECS instance type (plan.deployment.instance_type)."""
    user_data: str
    """Rendered cloud-init of a single-node replica (every node of the groups gets the same)."""
    disks: DiskLayout
    """System and data disk sizes and levels (from `plan_disks`)."""
    image_id: pulumi.Input[str]
    """Machine image."""
    vswitch_ids: Sequence[pulumi.Input[str]]
    """Node vSwitches, one per zone slot; group i prefers slot i and falls back to the others in order."""
    security_group_id: pulumi.Input[str]
    """Node security group."""
    role_name: pulumi.Input[str]
    """RAM role the instances run as (the launch template names it)."""
    spot: bool
    """Spot instances (plan.deployment.pricing == "spot")."""
    shares: Sequence[GroupShare]
    """Each group's floor, ceiling and initial size (from `group_shares`); `on_demand` shares are a spot plan's
    floor, launched from a second, pay-as-you-go template."""
    lb_kind: Literal["alb", "nlb"]
    """Load balancer the groups attach to."""
    server_group_id: pulumi.Input[str]
    """The load balancer's server group; ESS adds every node on each of `ports`."""
    ports: tuple[int, ...]
    """Engine ports of every node (packed replicas: port..port+n-1)."""
    launch_wait_s: int
    """Scale-out lifecycle hook timeout: a new node counts as in service (refresh, cooldown) after the plan's boot
    estimate, not when ECS reports it running."""
    tags: Mapping[str, str]
    """Tags for every resource (and the instances)."""
    target_qps: float | None = None
    """ALB QPS per engine that target tracking holds; None = no scaling rule."""
    warmup_s: int = 0
    """Seconds a new node needs before its metrics count (target tracking)."""
    steps: Sequence[ScheduledStep] = ()
    """Daily floor changes of the fleet (scheduled strategy)."""
    schedule_window: tuple[str, str] = ("", "")
    """(first launch, end of recurrence) of the scheduled tasks, ISO 8601 UTC."""
    depends_on: Sequence[pulumi.Resource] = field(default_factory=tuple)
    """Resources the groups wait for (the role's policy attachment, the listeners)."""
    on_demand_floor_nodes: int = 0
    """A spot plan's on-demand floor (nodes): how the scheduled floors split between the two kinds of groups."""
    spot_instance_types: pulumi.Input[Sequence[str]] = ()
    """Types the spot groups may launch, the planned one first (`spot_instance_types`); one or none = the
    template's type only."""


class AliReplicaGroups(pulumi.ComponentResource):
    """One launch template and one or two ESS scaling groups serving behind the load balancer."""

    scaling_group_ids: list[pulumi.Output[str]]
    launch_template_id: pulumi.Output[str]
    scaling_resources: list[pulumi.CustomResource]
    refreshes: list[pulumi.Output[str | None]]

    def __init__(self, name: str, args: ReplicaGroupsArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("infragen:alicloud:ReplicaGroups", name, None, opts)
        # Every change (user data, image, disks, type) becomes a new version of the template; the groups launch its
        # latest version and the refresh below rolls the running nodes onto it. A spot plan's on-demand floor
        # groups launch from a second template, the same but pay-as-you-go.
        template = self._template(name, args, spot=args.spot)
        floor = (self._template(f"{name}-od", args, spot=False, suffix="-od")
                 if any(s.on_demand for s in args.shares) else None)
        self.launch_template_id = template.id

        self.scaling_group_ids = []
        self.scaling_resources = []
        self.refreshes = []
        slots = list(args.vswitch_ids)
        for share in args.shares:
            chosen = floor if share.on_demand and floor is not None else template
            self._group(name, args, share, chosen, slots[share.index:] + slots[:share.index])
        self.register_outputs({"launch_template_id": template.id, "scaling_group_ids": self.scaling_group_ids})

    def _template(self, name: str, args: ReplicaGroupsArgs, *, spot: bool,
                  suffix: str = "") -> alicloud.ecs.EcsLaunchTemplate:
        child = pulumi.ResourceOptions(parent=self)
        tags = dict(args.tags)
        disks = args.disks
        data_disks = None
        if disks.data_gib is not None:
            data_disks = [alicloud.ecs.EcsLaunchTemplateDataDiskArgs(
                size=disks.data_gib, category=disks.data_category, performance_level=disks.data_level,
                encrypted=True, delete_with_instance=True, name=f"{args.prefix}-models",
                description="model store (mounted by cloud-init)")]
        return alicloud.ecs.EcsLaunchTemplate(
            f"{name}-template", launch_template_name=f"{args.prefix}-replica{suffix}", instance_type=args.instance_type,
            image_id=args.image_id, security_group_ids=[args.security_group_id], ram_role_name=args.role_name,
            instance_name=f"{args.prefix}-replica", host_name=f"{args.prefix}-replica"[:64].rstrip("-"),
            instance_charge_type="PostPaid", spot_strategy=SPOT_STRATEGY if spot else "NoSpot",
            # No public address: clients come through the load balancer, egress goes through the NAT gateway.
            internet_max_bandwidth_out=0,
            system_disk=alicloud.ecs.EcsLaunchTemplateSystemDiskArgs(
                category="cloud_essd", size=disks.system_gib, performance_level=disks.system_level, encrypted=True,
                delete_with_instance=True),
            data_disks=data_disks,
            # Metadata only with a session token (IMDSv2-style hardening), as on the fixed instances.
            http_endpoint="enabled", http_tokens="required",
            user_data=encode_user_data(args.user_data, what="user-data of the replicas"),
            description=f"infragen {args.prefix} single-node replica{' (on-demand floor)' if suffix else ''}",
            version_description="infragen plan", tags={**node_tags(tags), "infragen:role": "replica"},
            template_tags=tags,
            opts=child)

    def _group(self, name: str, args: ReplicaGroupsArgs, share: GroupShare, template: alicloud.ecs.EcsLaunchTemplate,
               vswitch_ids: list[pulumi.Input[str]]) -> None:
        child = pulumi.ResourceOptions(parent=self)
        gname = f"{name}-{share.key}"
        # Names of the plan's own groups are unchanged since before the floor existed (g0: hook boot-0, ...).
        number = share.key if share.on_demand else str(share.index)
        low, high = share.min_size, share.max_size
        spot = args.spot and not share.on_demand
        # PRIORITY: the first vSwitch's zone while it has stock, the next ones when it has none (zone fallback at
        # launch time, beyond preflight). Instance refresh needs this policy (Alibaba StartInstanceRefresh doc:
        # only ECS scaling groups with the priority policy); spread comes from two groups preferring two zones.
        # Spot groups may launch the plan's same-GPU alternatives too (more spot pools, fewer simultaneous
        # interruptions): the template's type first, the others when it has no stock.
        overrides = (pulumi.Output.from_input(args.spot_instance_types).apply(
            lambda types: [alicloud.ess.ScalingGroupLaunchTemplateOverrideArgs(instance_type=t) for t in types]
            if len(types) > 1 else None) if spot else None)
        group = alicloud.ess.ScalingGroup(
            gname, scaling_group_name=f"{args.prefix}-{share.key}", min_size=low, max_size=high,
            desired_capacity=share.desired, vswitch_ids=vswitch_ids, multi_az_policy="PRIORITY",
            launch_template_id=template.id, launch_template_version="Latest", launch_template_overrides=overrides,
            # ECS health: a stopped, released or failed node is replaced without `pulumi up`. The ALB's own health
            # check keeps traffic off a node whose engine is not ready.
            health_check_types=["ECS"], removal_policies=["OldestScalingConfiguration", "OldestInstance"],
            tags=dict(args.tags),
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(args.depends_on),
                                        ignore_changes=["desired_capacity"] if low != high else None))
        self.scaling_group_ids.append(group.id)
        alicloud.ess.LifecycleHook(
            f"{gname}-boot", scaling_group_id=group.id, name=f"{args.prefix}-boot-{number}",
            lifecycle_transition="SCALE_OUT", heartbeat_timeout=args.launch_wait_s, default_result="CONTINUE",
            opts=child)
        # One attachment per engine port: an attachment is (group, server group, type, port) (provider docs), so a
        # packed node joins the server group once per engine.
        for port in args.ports:
            alicloud.ess.ServerGroupAttachment(
                f"{gname}-lb-{port}", scaling_group_id=group.id, server_group_id=args.server_group_id,
                type=args.lb_kind.upper(), port=port, weight=100, force_attach=True, opts=child)
        if args.target_qps is not None and args.lb_kind == "alb":
            self.scaling_resources.append(alicloud.ess.ScalingRule(
                f"{gname}-qps", scaling_group_id=group.id, scaling_rule_name=f"{args.prefix}-qps-{number}",
                scaling_rule_type="TargetTrackingScalingRule", metric_name=QPS_METRIC, target_value=args.target_qps,
                alarm_dimension=alicloud.ess.ScalingRuleAlarmDimensionArgs(
                    dimension_key=QPS_DIMENSION, dimension_value=args.server_group_id),
                estimated_instance_warmup=args.warmup_s, opts=child))
        start, end = args.schedule_window
        for step in args.steps:
            nodes = share_of(step.nodes, share, list(args.shares), args.on_demand_floor_nodes)
            self.scaling_resources.append(alicloud.ess.ScheduledTask(
                f"{gname}-{step.name}", scheduled_task_name=f"{step.name}-{share.key}",
                scaling_group_id=group.id, min_value=nodes, desired_capacity=nodes, max_value=high,
                recurrence_type="Cron", recurrence_value=step.cron, launch_time=start, recurrence_end_time=end,
                description=f"infragen {args.prefix}: fleet floor {step.nodes} node(s), UTC cron {step.cron}",
                # The first launch only starts the recurrence; the end moves once a month (a year of repeats).
                opts=pulumi.ResourceOptions(parent=self, ignore_changes=["launch_time"])))
        # A changed template rolls the group: a new node first (MaxHealthyPercentage one node above the floor),
        # an old one out once the new one is in service (after the boot hook), never below capacity. Started only
        # for a template that has been updated (version 2 on): a refresh of a new group finds nothing to replace.
        refresh_max = refresh_max_healthy_percentage(share)

        def refresh(version: int | None) -> pulumi.Output[str] | None:
            if not version or version < 2:
                return None
            task = alicloud.ess.InstanceRefresh(
                f"{gname}-refresh-v{version}", scaling_group_id=group.id,
                desired_configuration_launch_template_id=template.id,
                desired_configuration_launch_template_version=str(version), min_healthy_percentage=100,
                max_healthy_percentage=refresh_max, skip_matching=True, opts=child)
            return task.urn  # type: ignore[return-value]

        self.refreshes.append(template.latest_version_number.apply(refresh))
