"""Alibaba Cloud compute component for multi-node replicas: fixed ECS instances (heads at fixed IPs), low-latency
deployment sets and elastic RDMA interfaces; also the user-data encoding both node kinds share.

Launches exactly the nodes the layout lists (from the plan); never picks a type, a count or a size itself.
Single-node replicas are not fixed instances: they live in ESS scaling groups (group.py).
"""

from __future__ import annotations

import base64
import gzip
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi
import pulumi_alicloud as alicloud

from infragen.provision.alicloud.layout import DiskLayout, NodeLayout

# Elastic RDMA interface = ENI in this traffic mode (pulumi-alicloud 4.0.0 ecs.Instance / ecs.EcsNetworkInterface).
ERI_TRAFFIC_MODE = "HighPerformance"
# Spot instances pay the market price capped at the pay-as-you-go price (ecs.Instance `spot_strategy`).
SPOT_STRATEGY = "SpotAsPriceGo"


@dataclass(frozen=True)
class NodesArgs:
    """Inputs of `AliNodes`."""

    prefix: str
    """Name prefix (the workload name)."""
    instance_type: str
    """ECS instance type (plan.deployment.instance_type)."""
    nodes: Sequence[NodeLayout]
    """Every node to launch, with role, zone slot and fixed IP (from `plan_nodes`)."""
    user_data: Sequence[str]
    """Rendered cloud-init per node, same order as `nodes`."""
    disks: DiskLayout
    """System and data disk sizes and levels (from `plan_disks`)."""
    image_id: pulumi.Input[str]
    """Machine image for every node."""
    vswitch_ids: Sequence[pulumi.Input[str]]
    """Node vSwitch per zone slot."""
    security_group_id: pulumi.Input[str]
    """Node security group."""
    role_name: pulumi.Input[str]
    """RAM role the instances run as (reads the KMS secrets), attached with `ecs.RamRoleAttachment`."""
    spot: bool
    """Launch spot instances (plan.deployment.pricing == "spot")."""
    eri_interfaces: int
    """Elastic RDMA interfaces per node (0 = none); the primary ENI is the first."""
    low_latency_placement: bool
    """Put each replica's nodes in one deployment set with the LowLatency strategy."""
    tags: Mapping[str, str]
    """Tags for every resource."""
    depends_on: Sequence[pulumi.Resource] = ()
    """Resources the instances must wait for (the role's policy attachment)."""
    on_demand_replicas: int = 0
    """A spot plan's on-demand floor in whole replicas: replicas 0..n-1 run pay-as-you-go, every node of them."""


class AliNodes(pulumi.ComponentResource):
    """The plan's ECS instances: private, encrypted ESSDs, IMDS tokens required, cloud-init user data."""

    instances: list[alicloud.ecs.Instance]
    instance_ids: list[pulumi.Output[str]]
    private_ips: list[pulumi.Output[str]]

    def __init__(self, name: str, args: NodesArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("infragen:alicloud:Nodes", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        tags = dict(args.tags)
        if len(args.user_data) != len(args.nodes):
            raise ValueError(f"{len(args.nodes)} nodes but {len(args.user_data)} user-data documents")

        deployment_sets: dict[int, alicloud.ecs.EcsDeploymentSet] = {}
        if args.low_latency_placement:
            for replica in sorted({n.replica for n in args.nodes}):
                # Deployment sets take no tags (pulumi-alicloud 4.0.0); the name carries the workload.
                deployment_sets[replica] = alicloud.ecs.EcsDeploymentSet(
                    f"{name}-r{replica}-placement", deployment_set_name=f"{args.prefix}-r{replica}",
                    strategy="LowLatency", description=f"infragen {args.prefix} replica {replica}: one low-latency "
                    "group", opts=child)

        disks = args.disks
        data_disks = []
        if disks.data_gib is not None:
            data_disks.append(alicloud.ecs.InstanceDataDiskArgs(
                size=disks.data_gib, category=disks.data_category, performance_level=disks.data_level,
                encrypted=True, delete_with_instance=True, name=f"{args.prefix}-models",
                description="model store (mounted by cloud-init)"))

        self.instances = []
        by_replica: dict[int, list[alicloud.ecs.Instance]] = {}
        for node, user_data in zip(args.nodes, args.user_data, strict=True):
            # Day 2: a changed user data replaces the instance (nothing re-runs cloud-init in place), replicas one
            # after the other (each waits for the previous replica's instances); a head's fixed IP must be free
            # before its replacement takes it, so heads go delete-before-replace.
            previous = by_replica.get(node.replica - 1, [])
            instance_opts = pulumi.ResourceOptions(
                parent=self, depends_on=[*args.depends_on, *previous], replace_on_changes=["userData"],
                delete_before_replace=node.private_ip is not None)
            vswitch_id = args.vswitch_ids[node.zone_slot]
            rdma = args.eri_interfaces > 0
            secondary = None
            if args.eri_interfaces >= 2:
                # The second ERI is created with the instance, on network card 1, so it exists when cloud-init runs.
                secondary = alicloud.ecs.InstanceNetworkInterfacesArgs(
                    network_card_index=1, network_interface_traffic_mode=ERI_TRAFFIC_MODE, vswitch_id=vswitch_id,
                    security_group_ids=[args.security_group_id])
            placement = deployment_sets.get(node.replica)
            instance = alicloud.ecs.Instance(
                f"{name}-{node.name}",
                instance_name=f"{args.prefix}-{node.name}",
                host_name=f"{args.prefix}-{node.name}"[:64],
                instance_type=args.instance_type,
                image_id=args.image_id,
                vswitch_id=vswitch_id,
                security_groups=[args.security_group_id],
                private_ip=node.private_ip,
                # No public address: clients come through the load balancer, egress goes through the NAT gateway.
                internet_max_bandwidth_out=0,
                instance_charge_type="PostPaid",
                # A spot plan's floor: its first replicas, whole, stay pay-as-you-go (plan.spot).
                spot_strategy=SPOT_STRATEGY if args.spot and node.replica >= args.on_demand_replicas else "NoSpot",
                system_disk_category="cloud_essd",
                system_disk_size=disks.system_gib,
                system_disk_performance_level=disks.system_level,
                system_disk_encrypted=True,
                data_disks=data_disks or None,
                # Metadata only with a session token (IMDSv2-style hardening).
                http_endpoint="enabled",
                http_tokens="required",
                user_data=encode_user_data(user_data, what=f"user-data of {node.name}"),
                deployment_set_id=placement.id if placement is not None else None,
                network_interface_traffic_mode=ERI_TRAFFIC_MODE if rdma else None,
                network_interfaces=secondary,
                description=f"infragen {args.prefix} {node.role} {node.index}",
                tags={**tags, "infragen:role": node.role},
                volume_tags=tags,
                opts=instance_opts,
            )
            self.instances.append(instance)
            by_replica.setdefault(node.replica, []).append(instance)
            # The role is attached once the instance exists; cloud-init's secret reads retry until it is there.
            alicloud.ecs.RamRoleAttachment(f"{name}-{node.name}-role", instance_id=instance.id,
                                           ram_role_name=args.role_name, opts=child)
            for card in range(2, args.eri_interfaces):
                eri = alicloud.ecs.EcsNetworkInterface(
                    f"{name}-{node.name}-eri-{card}", network_interface_name=f"{args.prefix}-{node.name}-eri-{card}",
                    vswitch_id=vswitch_id, security_group_ids=[args.security_group_id],
                    network_interface_traffic_mode=ERI_TRAFFIC_MODE, description="elastic RDMA interface",
                    tags=tags, opts=child)
                alicloud.ecs.EcsNetworkInterfaceAttachment(
                    f"{name}-{node.name}-eri-{card}-attach", instance_id=instance.id, network_interface_id=eri.id,
                    network_card_index=card, opts=child)

        self.instance_ids = [i.id for i in self.instances]
        self.private_ips = [i.private_ip for i in self.instances]
        self.register_outputs({"instance_ids": self.instance_ids, "private_ips": self.private_ips})


# "The size of the user data cannot exceed 16 KB before it is encoded" (Alibaba ECS doc "Use instance user data").
ECS_USER_DATA_MAX_BYTES = 16 * 1024


def encode_user_data(text: str, *, what: str = "user-data") -> str:
    """Base64 user data for ECS: the text as is when it fits 16 KB, else gzip-compressed (cloud-init detects and
    decompresses gzip). mtime=0 keeps the bytes identical between runs, so an unchanged plan never replaces a node."""
    raw = text.encode()
    if len(raw) > ECS_USER_DATA_MAX_BYTES:
        raw = gzip.compress(raw, compresslevel=9, mtime=0)
        if len(raw) > ECS_USER_DATA_MAX_BYTES:
            raise ValueError(f"{what} is {len(raw)} bytes even gzip-compressed, over ECS's 16 KB limit")
    return base64.b64encode(raw).decode()
