"""Alibaba Cloud network component: VPC, vSwitches, NAT egress, and the two security groups.

Reads only the plan-derived layout; opens nothing to the internet but the LB listener ports.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi
import pulumi_alicloud as alicloud

from infragen.provision.alicloud.layout import NetworkLayout

# Security group rule priorities run 1 (first) to 100 (last) (pulumi-alicloud ecs.SecurityGroupRule `priority`).
ALLOW_PRIORITY = 1
DENY_PRIORITY = 100


@dataclass(frozen=True)
class NetworkArgs:
    """Inputs of `AliNetwork`."""

    prefix: str
    """Name prefix of every resource (the workload name)."""
    layout: NetworkLayout
    """Address plan (from `plan_network`)."""
    node_zone_ids: pulumi.Input[Sequence[str]]
    """Zones where the instance type can be created, best first."""
    lb_zone_ids: pulumi.Input[Sequence[str]]
    """Zones where the load balancer can be created (at least two)."""
    listener_ports: tuple[int, ...]
    """Ports the load balancer listens on (the only ports open to clients)."""
    serving_ports: tuple[int, ...]
    """Engine ports on the nodes the load balancer forwards to."""
    allowed_cidrs: tuple[str, ...]
    """Client networks allowed to reach the listeners."""
    intra_cluster: bool
    """Open all traffic between nodes (multi-node replicas: Ray, NCCL over eRDMA)."""
    tags: Mapping[str, str]
    """Tags for every resource (plan digest...)."""


class AliNetwork(pulumi.ComponentResource):
    """A VPC with private node vSwitches, LB vSwitches in two zones, an Enhanced NAT gateway with an EIP for egress."""

    vpc_id: pulumi.Output[str]
    node_vswitch_ids: list[pulumi.Output[str]]
    node_zone_ids: list[pulumi.Output[str]]
    lb_vswitch_ids: list[pulumi.Output[str]]
    lb_zone_ids: list[pulumi.Output[str]]
    node_security_group_id: pulumi.Output[str]
    lb_security_group_id: pulumi.Output[str]

    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("infragen:alicloud:Network", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        tags = dict(args.tags)
        layout = args.layout

        vpc = alicloud.vpc.Network(f"{name}-vpc", vpc_name=f"{args.prefix}-vpc", cidr_block=layout.vpc_cidr,
                                   description=f"infragen {args.prefix}", tags=tags, opts=child)
        node_zones = pulumi.Output.from_input(args.node_zone_ids)
        lb_zones = pulumi.Output.from_input(args.lb_zone_ids)
        node_switches = []
        self.node_zone_ids = []
        for i, cidr in enumerate(layout.node_cidrs):
            zone = node_zones.apply(lambda zs, i=i: _pick(zs, i, "the instance type"))
            self.node_zone_ids.append(zone)
            node_switches.append(alicloud.vpc.Switch(
                f"{name}-nodes-{i}", vswitch_name=f"{args.prefix}-nodes-{i}", vpc_id=vpc.id, cidr_block=cidr,
                zone_id=zone, description="private: nodes, no public addresses", tags=tags, opts=child))
        lb_switches = []
        self.lb_zone_ids = []
        for i, cidr in enumerate(layout.lb_cidrs):
            zone = lb_zones.apply(lambda zs, i=i: _pick_distinct(zs, i))
            self.lb_zone_ids.append(zone)
            lb_switches.append(alicloud.vpc.Switch(
                f"{name}-lb-{i}", vswitch_name=f"{args.prefix}-lb-{i}", vpc_id=vpc.id, cidr_block=cidr,
                zone_id=zone, description="load balancer only", tags=tags, opts=child))

        # Egress only: nodes download the engine and the weights through SNAT; nothing can dial in through it.
        nat = alicloud.vpc.NatGateway(
            f"{name}-nat", vpc_id=vpc.id, vswitch_id=node_switches[0].id, nat_type="Enhanced",
            payment_type="PayAsYouGo", internet_charge_type="PayByLcu", nat_gateway_name=f"{args.prefix}-nat",
            description="egress for the nodes", tags=tags, opts=child)
        eip = alicloud.ecs.EipAddress(
            f"{name}-nat-eip", address_name=f"{args.prefix}-nat", payment_type="PayAsYouGo",
            internet_charge_type="PayByTraffic", bandwidth="200", description="NAT egress", tags=tags, opts=child)
        association = alicloud.ecs.EipAssociation(
            f"{name}-nat-eip-assoc", allocation_id=eip.id, instance_id=nat.id, instance_type="Nat", opts=child)
        for i, switch in enumerate(node_switches):
            alicloud.vpc.SnatEntry(
                f"{name}-snat-{i}", snat_table_id=nat.snat_table_ids, source_vswitch_id=switch.id,
                snat_ip=eip.ip_address, snat_entry_name=f"{args.prefix}-nodes-{i}",
                opts=pulumi.ResourceOptions(parent=self, depends_on=[association]))

        lb_sg = alicloud.ecs.SecurityGroup(
            f"{name}-lb-sg", security_group_name=f"{args.prefix}-lb", vpc_id=vpc.id,
            description="clients to the load balancer listeners only", tags=tags, opts=child)
        for port in args.listener_ports:
            for j, cidr in enumerate(args.allowed_cidrs):
                alicloud.ecs.SecurityGroupRule(
                    f"{name}-lb-in-{port}-{j}", security_group_id=lb_sg.id, type="ingress", ip_protocol="tcp",
                    port_range=f"{port}/{port}", cidr_ip=cidr, policy="accept", priority=ALLOW_PRIORITY,
                    nic_type="intranet", description=f"clients to listener {port}", opts=child)
        # Alibaba: a load balancer in a security group with only Allow rules still accepts everyone; the Allow rules
        # bind only with a Deny-all at a lower priority below them (SLB doc "Add an ALB instance to a security group").
        alicloud.ecs.SecurityGroupRule(
            f"{name}-lb-deny-rest", security_group_id=lb_sg.id, type="ingress", ip_protocol="all",
            port_range="-1/-1", cidr_ip="0.0.0.0/0", policy="drop", priority=DENY_PRIORITY, nic_type="intranet",
            description="everyone not allowed above", opts=child)

        node_sg = alicloud.ecs.SecurityGroup(
            f"{name}-node-sg", security_group_name=f"{args.prefix}-nodes", vpc_id=vpc.id,
            description="engine port from the load balancer vSwitches; no SSH (use Cloud Assistant)", tags=tags,
            opts=child)
        low, high = min(args.serving_ports), max(args.serving_ports)
        # ALB/NLB reach the backends from their own addresses inside the LB vSwitches.
        for j, cidr in enumerate(layout.lb_cidrs):
            alicloud.ecs.SecurityGroupRule(
                f"{name}-node-in-lb-{j}", security_group_id=node_sg.id, type="ingress", ip_protocol="tcp",
                port_range=f"{low}/{high}", cidr_ip=cidr, policy="accept", nic_type="intranet",
                description="load balancer to the engine ports", opts=child)
        if args.intra_cluster:
            alicloud.ecs.SecurityGroupRule(
                f"{name}-node-in-self", security_group_id=node_sg.id, type="ingress", ip_protocol="all",
                port_range="-1/-1", source_security_group_id=node_sg.id, policy="accept", nic_type="intranet",
                description="nodes of one replica: Ray, NCCL, eRDMA", opts=child)

        self.vpc_id = vpc.id
        self.node_vswitch_ids = [s.id for s in node_switches]
        self.lb_vswitch_ids = [s.id for s in lb_switches]
        self.node_security_group_id = node_sg.id
        self.lb_security_group_id = lb_sg.id
        self.register_outputs({
            "vpc_id": self.vpc_id, "node_vswitch_ids": self.node_vswitch_ids, "lb_vswitch_ids": self.lb_vswitch_ids,
            "node_security_group_id": node_sg.id, "lb_security_group_id": lb_sg.id, "nat_gateway_id": nat.id,
        })


def _pick(zones: Sequence[str], i: int, what: str) -> str:
    if not zones:
        raise pulumi.RunError(f"no zone of this region offers {what}; choose another region in the workload")
    return zones[i % len(zones)]


def _pick_distinct(zones: Sequence[str], i: int) -> str:
    distinct = list(dict.fromkeys(zones))
    if len(distinct) < 2:
        raise pulumi.RunError(f"the load balancer needs two zones, the region offers {distinct}")
    return distinct[i]
