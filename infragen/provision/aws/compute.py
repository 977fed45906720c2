"""Compute component: launch templates (Deep Learning AMI or Ubuntu, IMDSv2, encrypted volumes, the plan's
storage, EFA interfaces, rendered cloud-init) and the nodes: an Auto Scaling group of single-node replicas,
or per multi-node replica a head instance with a fixed IP plus a worker group in one cluster placement group.

Counts, sizes and ports come from the plan; makes no sizing decision.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from infragen.plan import Plan
from infragen.provision.aws.layout import (
    DATA_DEVICE_NAME,
    ROOT_DEVICE_NAME,
    ReplicaGroup,
    Role,
    Subnets,
    efa_interfaces,
    encode_user_data,
    image_parameter,
    replica_groups,
    single_node_count,
)

#: Renders the cloud-init for one node: (role, head private IP or None) -> user-data text.
UserDataRenderer = Callable[[Role, "str | None"], str]
#: IMDS hop limit 2 lets a container on the node reach IMDSv2 (AWS's recommendation for container hosts);
#: tokens stay required, so v1-style SSRF requests get nothing.
IMDS_HOP_LIMIT = 2


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


class Compute(pulumi.ComponentResource):
    """Launch templates and nodes for one plan."""

    def __init__(self, name: str, args: ComputeArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("infragen:aws:Compute", name, None, opts)
        self._name = name
        self._args = args
        plan = args.plan
        self.image_id = aws.ssm.get_parameter_output(
            name=image_parameter(plan), opts=pulumi.InvokeOutputOptions(parent=self)).value
        self.groups: list[aws.autoscaling.Group] = []
        self.head_instances: list[aws.ec2.Instance] = []
        self.launch_templates: list[aws.ec2.LaunchTemplate] = []

        if single_node_count(plan):
            lt = self._launch_template(f"{name}-replica", "replica", None, None, None, spot_in_template=False)
            self.groups.append(self._group(f"{name}-replicas", lt, plan.deployment.nodes, args.private_subnet_ids,
                                           target_groups=args.target_group_arns, placement_group=None))
        for group in replica_groups(plan, args.subnets):
            self._multinode_replica(group)

        self.register_outputs({
            "image_id": self.image_id,
            "group_names": [g.name for g in self.groups],
            "head_private_ips": [i.private_ip for i in self.head_instances],
        })

    # -- multi-node replicas -------------------------------------------------------------------------------
    def _multinode_replica(self, group: ReplicaGroup) -> None:
        args, name = self._args, f"{self._name}-r{group.index}"
        subnet_id = args.private_subnet_ids[group.az_index]
        pg = aws.ec2.PlacementGroup(f"{name}-pg", strategy="cluster", tags=args.tags,
                                    opts=pulumi.ResourceOptions(parent=self))
        head_lt = self._launch_template(f"{name}-head", "head", group.head_ip, subnet_id, pg.name,
                                        spot_in_template=True, fixed_ip=group.head_ip)
        head = aws.ec2.Instance(
            f"{name}-head",
            launch_template=aws.ec2.InstanceLaunchTemplateArgs(id=head_lt.id,
                                                               version=head_lt.latest_version.apply(str)),
            tags={**args.tags, "Name": f"{name}-head", "infragen:role": "head"},
            # The replacement reuses the fixed IP, so the old head must go first.
            opts=pulumi.ResourceOptions(parent=self, delete_before_replace=True))
        self.head_instances.append(head)
        # Only the head serves the OpenAI API; workers run their pipeline stages behind it.
        for port, tg_arn in zip(args.target_ports, args.target_group_arns, strict=True):
            aws.lb.TargetGroupAttachment(f"{name}-head-{port}", target_group_arn=tg_arn, target_id=head.id,
                                         port=port, opts=pulumi.ResourceOptions(parent=self))
        if group.workers:
            # Subnet and placement come from the group (an ASG launch template names neither).
            worker_lt = self._launch_template(f"{name}-worker", "worker", group.head_ip, None, None,
                                              spot_in_template=False)
            self.groups.append(self._group(f"{name}-workers", worker_lt, group.workers, [subnet_id],
                                           target_groups=[], placement_group=pg.name,
                                           depends_on=[head]))

    # -- building blocks ---------------------------------------------------------------------------------------
    def _launch_template(self, name: str, role: Role, head_address: str | None, subnet_id: pulumi.Input[str] | None,
                         placement_group: pulumi.Input[str] | None, *, spot_in_template: bool,
                         fixed_ip: str | None = None) -> aws.ec2.LaunchTemplate:
        args, plan = self._args, self._args.plan
        user_data = encode_user_data(args.render_user_data(role, head_address))
        market = None
        if spot_in_template and plan.deployment.pricing == "spot":
            market = aws.ec2.LaunchTemplateInstanceMarketOptionsArgs(market_type="spot")
        lt = aws.ec2.LaunchTemplate(
            name,
            image_id=self.image_id,
            instance_type=plan.deployment.instance_type,
            iam_instance_profile=aws.ec2.LaunchTemplateIamInstanceProfileArgs(arn=args.instance_profile_arn),
            metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
                http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=IMDS_HOP_LIMIT,
                instance_metadata_tags="disabled"),
            block_device_mappings=self._block_devices(),
            network_interfaces=self._interfaces(subnet_id, fixed_ip),
            placement=aws.ec2.LaunchTemplatePlacementArgs(group_name=placement_group) if placement_group else None,
            instance_market_options=market,
            ebs_optimized="true",
            user_data=user_data,
            update_default_version=True,
            tag_specifications=[
                aws.ec2.LaunchTemplateTagSpecificationArgs(resource_type=kind,
                                                           tags={**args.tags, "infragen:role": role})
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

    def _interfaces(self, subnet_id: pulumi.Input[str] | None,
                    fixed_ip: str | None) -> list[aws.ec2.LaunchTemplateNetworkInterfaceArgs]:
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
                delete_on_termination="true", security_groups=groups, subnet_id=subnet_id,
                private_ip_address=fixed_ip if primary else None))
        return out

    def _group(self, name: str, lt: aws.ec2.LaunchTemplate, count: int, subnet_ids: list[pulumi.Input[str]], *,
               target_groups: list[pulumi.Input[str]], placement_group: pulumi.Input[str] | None,
               depends_on: list[pulumi.Resource] | None = None) -> aws.autoscaling.Group:
        args, plan = self._args, self._args.plan
        spec = {"launch_template_id": lt.id, "version": lt.latest_version.apply(str)}
        if plan.deployment.pricing == "spot":
            # The plan was priced on spot: all capacity from spot pools, replaced on interruption.
            capacity: dict[str, object] = {"mixed_instances_policy": aws.autoscaling.GroupMixedInstancesPolicyArgs(
                instances_distribution=aws.autoscaling.GroupMixedInstancesPolicyInstancesDistributionArgs(
                    on_demand_base_capacity=0, on_demand_percentage_above_base_capacity=0,
                    spot_allocation_strategy="price-capacity-optimized"),
                launch_template=aws.autoscaling.GroupMixedInstancesPolicyLaunchTemplateArgs(
                    launch_template_specification=(
                        aws.autoscaling.GroupMixedInstancesPolicyLaunchTemplateLaunchTemplateSpecificationArgs(
                            **spec)),
                    overrides=[aws.autoscaling.GroupMixedInstancesPolicyLaunchTemplateOverrideArgs(
                        instance_type=plan.deployment.instance_type)]))}
        else:
            capacity = {"launch_template": aws.autoscaling.GroupLaunchTemplateArgs(
                id=spec["launch_template_id"], version=spec["version"])}
        serving = bool(target_groups)
        return aws.autoscaling.Group(
            name,
            min_size=count, max_size=count, desired_capacity=count,
            vpc_zone_identifiers=subnet_ids,
            target_group_arns=target_groups or None,
            health_check_type="ELB" if serving else "EC2",
            health_check_grace_period=plan.network.health_check_grace_s,
            placement_group=placement_group,
            capacity_rebalance=plan.deployment.pricing == "spot",
            instance_refresh=aws.autoscaling.GroupInstanceRefreshArgs(
                strategy="Rolling",
                preferences=aws.autoscaling.GroupInstanceRefreshPreferencesArgs(
                    min_healthy_percentage=50, instance_warmup=str(plan.network.health_check_grace_s))),
            tags=[aws.autoscaling.GroupTagArgs(key=k, value=v, propagate_at_launch=True)
                  for k, v in sorted(args.tags.items())],
            opts=pulumi.ResourceOptions(parent=self, depends_on=depends_on or []),
            **capacity)
