"""Compute component: launch templates (Deep Learning AMI or Ubuntu, IMDSv2, encrypted volumes, the plan's
storage, EFA interfaces, rendered cloud-init, optional capacity reservation) and the nodes: an Auto Scaling
group of single-node replicas, or per multi-node replica a head group of one (its node claims the replica's
reserved fixed address) plus a worker group in one cluster placement group. Serving groups hold new nodes in a
launch lifecycle hook until the node's readiness unit completes it.

Counts, sizes and ports come from the plan; makes no sizing decision.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from infragen.plan import Plan
from infragen.provision.aws.autoscaling import group_bounds
from infragen.provision.aws.capacity import capacity_args, on_demand_base_nodes, on_demand_replica
from infragen.provision.aws.layout import (
    DATA_DEVICE_NAME,
    LIFECYCLE_HOOK_NAME,
    POST_HOOK_GRACE_S,
    ROOT_DEVICE_NAME,
    ReplicaGroup,
    Role,
    Subnets,
    deregistration_delay_s,
    efa_interfaces,
    encode_user_data,
    image_parameter,
    replica_groups,
    single_node_count,
)
from infragen.provision.aws.port_targets import drain_hook
from infragen.provision.common import node_tags

#: Renders the cloud-init for one node: (role, head private IP or None) -> user-data text.
UserDataRenderer = Callable[[Role, "str | None"], str]
#: Lifecycle hook heartbeat bounds, seconds (Auto Scaling API: 30-7200).
HOOK_HEARTBEAT_RANGE_S = (30, 7200)
#: Extra time `pulumi up` waits for a group's capacity beyond the readiness budget (launch, boot, checks).
CAPACITY_WAIT_MARGIN_S = 600
#: IMDS hop limit 2 lets a container on the node reach IMDSv2 (AWS's recommendation for container hosts);
#: tokens stay required, so v1-style SSRF requests get nothing.
IMDS_HOP_LIMIT = 2


#: Tag holding a multi-node replica's generation (its launch templates' versions) on both its groups.
GENERATION_TAG = "infragen:replica-generation"
#: Group inputs whose change replaces a multi-node replica's groups (Pulumi property names).
ROLL_TRIGGERS = ("launchTemplate", "mixedInstancesPolicy", "tags")


@dataclass(frozen=True)
class RollOptions:
    """How a multi-node replica's groups roll: replaced with their generation, after the previous replica."""

    generation: pulumi.Output[str]
    """The replica's launch template versions; a change replaces head and worker groups together."""
    after: list[pulumi.Resource]
    """The previous replica's groups: this replica is replaced only once those stand (the head ready)."""


@dataclass(frozen=True)
class ComputeArgs:
    """What the nodes need."""

    plan: Plan
    """The deployment (instance type, counts, storage, grace period, pricing)."""
    subnets: Subnets
    """Private/public CIDRs (for fixed head IPs)."""
    private_subnet_ids: list[pulumi.Input[str]]
    """Private subnets, one per AZ, in the same order as `subnets.private`."""
    node_security_group_id: pulumi.Input[str]
    """Security group of every node's primary interface."""
    efa_security_group_id: pulumi.Input[str] | None
    """Self-referencing EFA group (multi-node), attached to every interface."""
    instance_profile_arn: pulumi.Input[str]
    """Instance profile allowed to read the secrets."""
    target_group_arns: list[pulumi.Input[str]]
    """Target groups, one per port in `target_ports` order."""
    target_ports: tuple[int, ...]
    """Engine ports matching `target_group_arns`."""
    render_user_data: UserDataRenderer
    """Cloud-init renderer (the real one: infragen.render.render_user_data)."""
    tags: dict[str, str]
    """Tags for every resource (plan digest included)."""
    image_id: str | None = None
    """Pinned AMI (`infragen:imageId`); None = resolve the image's SSM parameter at each deploy."""
    capacity_reservation_id: str | None = None
    """On-Demand Capacity Reservation or Capacity Block to launch into (`infragen:capacityReservationId`)."""
    capacity_block: bool = False
    """The reservation is a Capacity Block for ML (`infragen:capacityBlock`): market type capacity-block."""
    spot_instance_types: tuple[str, ...] | list[str] = ()
    """Spot plans: the types the spot pools may launch (the planned one first; capacity.spot_types)."""


def hook_heartbeat_s(plan: Plan) -> int:
    """How long a new serving node may take to become ready: the plan's download + load estimate."""
    low, high = HOOK_HEARTBEAT_RANGE_S
    return max(low, min(plan.network.health_check_grace_s, high))


class Compute(pulumi.ComponentResource):
    """Launch templates and nodes for one plan."""

    def __init__(self, name: str, args: ComputeArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("infragen:aws:Compute", name, None, opts)
        self._name = name
        self._args = args
        plan = args.plan
        # A pinned image never changes under a plan; the SSM parameter moves with every AMI release (a roll).
        self.image_id: pulumi.Input[str] = args.image_id or aws.ssm.get_parameter_output(
            name=image_parameter(plan), opts=pulumi.InvokeOutputOptions(parent=self)).value
        self.groups: list[aws.autoscaling.Group] = []
        self.head_groups: list[aws.autoscaling.Group] = []
        self.head_ips: list[str] = []
        self.launch_templates: list[aws.ec2.LaunchTemplate] = []
        self._previous_replica: list[pulumi.Resource] = []

        if single_node_count(plan):
            lt = self._launch_template(f"{name}-replica", "replica", None)
            self.groups.append(self._group(f"{name}-replicas", lt, plan.deployment.nodes, args.private_subnet_ids,
                                           target_groups=args.target_group_arns, placement_group=None))
        for group in replica_groups(plan, args.subnets):
            self._multinode_replica(group)

        self.register_outputs({
            "image_id": self.image_id,
            "group_names": [g.name for g in self.groups],
            "head_private_ips": self.head_ips,
        })

    # -- multi-node replicas -------------------------------------------------------------------------------
    def _multinode_replica(self, group: ReplicaGroup) -> None:
        args, name = self._args, f"{self._name}-r{group.index}"
        subnet_id = args.private_subnet_ids[group.az_index]
        pg = aws.ec2.PlacementGroup(f"{name}-pg", strategy="cluster", tags=args.tags,
                                    opts=pulumi.ResourceOptions(parent=self))
        # The head is a group of one: a failed or interrupted head is replaced without `pulumi up`; its node
        # claims the replica's fixed address (reserved in the subnet) so the workers find it again. Only the
        # head serves the OpenAI API; workers run their pipeline stages behind it.
        head_lt = self._launch_template(f"{name}-head", "head", group.head_ip)
        worker_lt = self._launch_template(f"{name}-worker", "worker", group.head_ip) if group.workers else None
        on_demand = on_demand_replica(args.plan, group.index)
        # With two or more replicas a plan change rolls one replica at a time, head and workers together (docs/aws.md,
        # "Rolling a plan change"): both groups carry the replica's generation (its launch templates' versions) and
        # are replaced when it changes, the old ones deleted first (the replica's GPUs and reservation are reused);
        # the next replica's groups wait until this one's head group has its node InService, i.e. ready (launch
        # hook). A lone replica keeps the in-place refresh: the head launches first, a shorter outage.
        generation = pulumi.Output.concat("head-v", head_lt.latest_version.apply(str), "-worker-v",
                                          worker_lt.latest_version.apply(str) if worker_lt else "none")
        roll = (RollOptions(generation=generation, after=list(self._previous_replica))
                if args.plan.deployment.replicas > 1 else None)
        head = self._group(f"{name}-head", head_lt, 1, [subnet_id], target_groups=args.target_group_arns,
                           placement_group=pg.name, on_demand=on_demand, roll=roll)
        self.groups.append(head)
        self.head_groups.append(head)
        self.head_ips.append(group.head_ip)
        self._previous_replica = [head]
        if worker_lt is not None:
            # Launched together with the head (no ordering): the head waits for the workers' GPUs itself.
            workers = self._group(f"{name}-workers", worker_lt, group.workers, [subnet_id], target_groups=[],
                                  placement_group=pg.name, on_demand=on_demand, roll=roll)
            self.groups.append(workers)
            self._previous_replica.append(workers)

    # -- building blocks ---------------------------------------------------------------------------------------
    def _launch_template(self, name: str, role: Role, head_address: str | None) -> aws.ec2.LaunchTemplate:
        """A launch template for an Auto Scaling group (subnet and placement group come from the group)."""
        args, plan = self._args, self._args.plan
        user_data = encode_user_data(args.render_user_data(role, head_address))
        market = reservation = None
        if args.capacity_reservation_id:
            reservation = aws.ec2.LaunchTemplateCapacityReservationSpecificationArgs(
                capacity_reservation_target=aws.ec2.LaunchTemplateCapacityReservationSpecificationCapacityReservationTargetArgs(
                    capacity_reservation_id=args.capacity_reservation_id))
            if args.capacity_block:
                market = aws.ec2.LaunchTemplateInstanceMarketOptionsArgs(market_type="capacity-block")
        lt = aws.ec2.LaunchTemplate(
            name,
            image_id=self.image_id,
            instance_type=plan.deployment.instance_type,
            iam_instance_profile=aws.ec2.LaunchTemplateIamInstanceProfileArgs(arn=args.instance_profile_arn),
            metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
                http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=IMDS_HOP_LIMIT,
                instance_metadata_tags="disabled"),
            block_device_mappings=self._block_devices(),
            network_interfaces=self._interfaces(),
            instance_market_options=market,
            capacity_reservation_specification=reservation,
            ebs_optimized="true",
            user_data=user_data,
            update_default_version=True,
            tag_specifications=[
                aws.ec2.LaunchTemplateTagSpecificationArgs(resource_type=kind,
                                                           tags={**node_tags(args.tags), "infragen:role": role})
                for kind in ("instance", "volume", "network-interface")
            ],
            tags=args.tags,
            opts=pulumi.ResourceOptions(parent=self))
        self.launch_templates.append(lt)
        return lt

    def _block_devices(self) -> list[aws.ec2.LaunchTemplateBlockDeviceMappingArgs]:
        storage = self._args.plan.storage
        devices = [aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
            device_name=ROOT_DEVICE_NAME,
            ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                volume_size=storage.root_volume_gib, volume_type="gp3", encrypted="true",
                delete_on_termination="true"))]
        # Instance-store NVMe disks are exposed automatically on Nitro types; cloud-init stripes them.
        if storage.kind == "volume":
            volume_type = storage.volume_type or "gp3"
            devices.append(aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
                device_name=DATA_DEVICE_NAME,
                ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                    volume_size=storage.volume_gib, volume_type=volume_type, encrypted="true",
                    delete_on_termination="true", iops=storage.volume_iops,
                    throughput=storage.volume_throughput_mb_per_s if volume_type == "gp3" else None)))
        return devices

    def _interfaces(self) -> list[aws.ec2.LaunchTemplateNetworkInterfaceArgs]:
        args = self._args
        efa_sg = args.efa_security_group_id
        out = []
        for slot in efa_interfaces(args.plan):
            primary = slot.network_card_index == 0 and slot.device_index == 0
            groups: list[pulumi.Input[str]] = [args.node_security_group_id] if primary else []
            if efa_sg is not None:
                groups.append(efa_sg)
            out.append(aws.ec2.LaunchTemplateNetworkInterfaceArgs(
                network_card_index=slot.network_card_index, device_index=slot.device_index,
                interface_type=None if slot.interface_type == "interface" else slot.interface_type,
                associate_public_ip_address="false" if primary else None,
                delete_on_termination="true", security_groups=groups))
        return out

    def _group(self, name: str, lt: aws.ec2.LaunchTemplate, count: int, subnet_ids: list[pulumi.Input[str]], *,
               target_groups: list[pulumi.Input[str]],
               placement_group: pulumi.Input[str] | None, on_demand: bool = False,
               roll: RollOptions | None = None) -> aws.autoscaling.Group:
        args, plan = self._args, self._args.plan
        spot = plan.deployment.pricing == "spot" and not on_demand
        # A spot group keeps the plan's on-demand base (single-node replicas); a multi-node replica is wholly on
        # demand or wholly spot (capacity.on_demand_replica), and its spot pools are the planned type only (one
        # EFA layout and placement group).
        capacity = capacity_args(
            lt.id, lt.latest_version.apply(str), spot=spot,
            on_demand_nodes=on_demand_base_nodes(plan) if placement_group is None else 0,
            instance_types=list(args.spot_instance_types or [plan.deployment.instance_type])
            if placement_group is None else [plan.deployment.instance_type])
        serving = bool(target_groups)
        heartbeat = hook_heartbeat_s(plan)
        # Serving nodes wait in Pending:Wait until their readiness unit completes the hook (docs/bootstrap.md):
        # only then are they registered with the target groups, and an instance refresh moves on.
        hooks = [aws.autoscaling.GroupInitialLifecycleHookArgs(
            name=LIFECYCLE_HOOK_NAME, lifecycle_transition="autoscaling:EC2_INSTANCE_LAUNCHING",
            heartbeat_timeout=heartbeat, default_result="ABANDON")] if serving else None
        drain = drain_hook(plan, deregistration_delay_s(plan)) if serving else None
        if hooks and drain:
            hooks.append(drain)  # packed nodes deregister their own engine ports first (port_targets.py)
        # A group of one (a head) launches its replacement before terminating the old node.
        healthy = (100, 200) if count == 1 else (50, 100)
        # The serving group of single-node replicas follows the plan's daily view (autoscaling.py); the scaler owns
        # its desired capacity from then on.
        low, high, desired = group_bounds(plan, count) if serving else (count, count, count)
        return aws.autoscaling.Group(
            name,
            min_size=low, max_size=high, desired_capacity=desired,
            vpc_zone_identifiers=subnet_ids,
            target_group_arns=target_groups or None,
            health_check_type="ELB" if serving else "EC2",
            health_check_grace_period=POST_HOOK_GRACE_S if serving else plan.network.health_check_grace_s,
            initial_lifecycle_hooks=hooks,
            wait_for_capacity_timeout=f"{(heartbeat if serving else 0) + CAPACITY_WAIT_MARGIN_S}s",
            placement_group=placement_group,
            capacity_rebalance=spot,
            # Single-node replicas roll in place: the refresh replaces nodes while the hook holds each new one
            # until it is ready. Multi-node replicas roll by replacement instead (`roll`).
            instance_refresh=None if roll is not None else aws.autoscaling.GroupInstanceRefreshArgs(
                strategy="Rolling",
                preferences=aws.autoscaling.GroupInstanceRefreshPreferencesArgs(
                    min_healthy_percentage=healthy[0], max_healthy_percentage=healthy[1],
                    instance_warmup=str(POST_HOOK_GRACE_S if serving else plan.network.health_check_grace_s))),
            tags=[*(aws.autoscaling.GroupTagArgs(key=k, value=v, propagate_at_launch=True)
                    for k, v in sorted(node_tags(args.tags).items())),
                  *([aws.autoscaling.GroupTagArgs(key=GENERATION_TAG, value=roll.generation, propagate_at_launch=False)]
                    if roll is not None else [])],
            opts=pulumi.ResourceOptions(
                parent=self, ignore_changes=["desired_capacity"] if low != high else None,
                **({"replace_on_changes": list(ROLL_TRIGGERS), "delete_before_replace": True,
                    "depends_on": roll.after} if roll is not None else {})),
            **capacity)
